// The search over the dead letters shown: as the API's queries and
// selections take it, and in words.

import { state } from './shared.js';

/** The search's text and times, as the API takes them. */
export function searchParams() {
  return {
    text: state.search.text,
    failed_after: state.search.failed_after,
    failed_before: state.search.failed_before,
  };
}

/** The search and the group, in words. */
export function describeSearch() {
  const parts = [];
  if (state.search.text) parts.push('containing "' + state.search.text + '"');
  if (state.search.failed_after) parts.push('failed after ' + state.search.failed_after);
  if (state.search.failed_before) parts.push('failed before ' + state.search.failed_before);
  if (state.group) parts.push('in group ' + state.group.id);
  return parts.length ? parts.join(', ') : 'every message';
}
