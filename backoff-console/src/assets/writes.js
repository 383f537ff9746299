// The writes: replay, edit and discard of messages and groups, the purge
// of a dead-letter queue and the rebuild of its index, each after a
// confirmation, with the token. A write done is announced as 'written'
// ({ action, body, outcome }), for the depths and the view to be shown
// again; done or not, the audit is read again. With the replay options'
// "as a replay job" ticked, a replay starts a replay job instead.

import { $, api, clearError, consumerPath, emit, hasToken, notice, showError, state, text } from './shared.js';
import { loadAudit } from './audit.js';
import { jobPlan } from './job-options.js';
import { startJob } from './jobs.js';

// --- replay, edit and discard ----------------------------------------------

export async function writeGroup(action, group) {
  const question =
    action === 'replay'
      ? 'Replay the ' + group.count + ' message(s) of group ' + group.id + ' (' + group.fingerprint + ') to the work queue ' + state.queue + '?'
      : 'Discard the ' + group.count + ' message(s) of group ' + group.id + ' (' + group.fingerprint + ') for good?';
  await write(action, { group: group.id }, question);
}

export async function write(action, body, question) {
  if (state.readOnly || !hasToken()) return false;
  const plan = action === 'replay' ? jobPlan() : null;
  if (plan) return startJob(state.queue, body, plan, question);
  if (!window.confirm(question)) return false;
  const queue = state.queue;
  try {
    const outcome = await api('POST', consumerPath(queue, action), body);
    clearError('action');
    const verb = action === 'discard' ? 'Discarded ' : action === 'edit' ? 'Replayed edited ' : 'Replayed ';
    let done = verb + outcome.matched.length + ' message(s); ' + outcome.kept + ' left in the dead-letter queue of ' + queue + ' (by ' + outcome.by + ').';
    if (outcome.skipped && outcome.skipped.length) done += ' ' + outcome.skipped.length + ' could not be replayed and stay: ' + outcome.skipped.map((s) => s.reason).join('; ');
    notice(done);
    await emit('written', { action, body, outcome });
    loadAudit();
    return true;
  } catch (e) {
    const name = action === 'replay' ? 'Replay' : action === 'edit' ? 'Edited replay' : 'Discard';
    showError('action', name + ' refused or failed: ' + e.message);
    loadAudit();
    return false;
  }
}

// --- purge and rebuild of the index ------------------------------------------

/** Purges the dead-letter queue shown, or rebuilds its index, after a confirmation. */
async function writeQueue(action) {
  if (state.readOnly || !hasToken()) return false;
  const queue = state.queue;
  if (!queue) return false;
  const depth = state.viewDepth === null || state.viewDepth === undefined ? 'all' : 'all ' + state.viewDepth;
  const question =
    action === 'purge'
      ? 'Purge the dead-letter queue of ' + queue + ': ' + depth + ' message(s) removed for good, at once, with no copy?'
      : 'Rebuild the dead-letter index of ' + queue + ' with a pass over its queue?';
  if (!window.confirm(question)) return false;
  const path = action === 'purge' ? 'purge' : 'rebuild-index';
  try {
    const outcome = await api('POST', consumerPath(queue, path), {});
    clearError('action');
    if (action === 'purge') {
      const note = outcome.checkpoint ? ' The index: ' + checkpointText(outcome.checkpoint) + '.' : '';
      notice('Purged ' + outcome.purged + ' message(s) from the dead-letter queue of ' + queue + ' (by ' + outcome.by + ').' + note);
    } else {
      notice('Rebuilt the dead-letter index of ' + queue + ': ' + outcome.source_reason + ' (by ' + outcome.by + ').');
    }
    await emit('written', { action, body: {}, outcome });
    loadAudit();
    return true;
  } catch (e) {
    showError('action', (action === 'purge' ? 'Purge' : 'Rebuild of the index') + ' refused or failed: ' + e.message);
    loadAudit();
    return false;
  }
}

/** A checkpoint note of the API, in words. */
function checkpointText(note) {
  if (note.kind === 'written') return 'checkpoint written at offset ' + text(note.offset) + ', the next read is from the index';
  if (note.kind === 'not_written') return 'no checkpoint written: ' + text(note.reason);
  return 'starting from the checkpoint at offset ' + text(note.offset);
}

/** The buttons that purge the dead-letter queue and rebuild its index. */
export function wireQueueWrites() {
  $('purge').addEventListener('click', () => writeQueue('purge'));
  $('rebuild-index').addEventListener('click', () => writeQueue('rebuild'));
}
