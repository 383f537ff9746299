// A dead letter's body and headers edited, then replayed.

import { $, api, clearError, consumerPath, hasToken, query, showError, state } from './shared.js';
import { write } from './writes.js';

/** The user headers of a message (not the framework's x- ones), as `name: value` lines. */
function editableHeaders(m) {
  return Object.entries(m.headers || {}).filter(([name]) => !name.startsWith('x-'));
}

export async function openEdit(m) {
  if (state.readOnly || !hasToken()) return;
  try {
    const body = await api('GET', consumerPath(state.queue, 'body' + query({ message_id: m.message_id })));
    $('edit-body').value = body.body;
    $('edit-body').disabled = !body.utf8;
    $('edit-body').title = body.utf8 ? '' : 'the body is not UTF-8 text: only the headers can be edited';
    $('edit-headers').value = editableHeaders(m).map(([k, v]) => k + ': ' + v).join('\n');
    $('edit').dataset.original = body.body;
    $('edit').hidden = false;
    $('edit-body').focus();
    clearError('action');
  } catch (e) {
    showError('action', 'Edit: ' + e.message);
  }
}

async function submitEdit(event) {
  event.preventDefault();
  const m = state.message;
  if (!m) return;
  const request = { message_id: m.message_id, set_headers: {}, remove_headers: [] };
  if (!$('edit-body').disabled && $('edit-body').value !== $('edit').dataset.original) request.body = $('edit-body').value;
  const before = new Map(editableHeaders(m));
  const after = new Map();
  for (const line of $('edit-headers').value.split('\n')) {
    if (!line.trim()) continue;
    const at = line.indexOf(':');
    if (at <= 0) {
      showError('action', 'Edit: write each header as `name: value` (' + line + ')');
      return;
    }
    after.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
  }
  for (const [name, value] of after) if (before.get(name) !== value) request.set_headers[name] = value;
  for (const name of before.keys()) if (!after.has(name)) request.remove_headers.push(name);
  const question =
    'Replay message ' + m.message_id + ' with the edited ' + (request.body !== undefined ? 'body' : '') +
    (request.body !== undefined && (Object.keys(request.set_headers).length || request.remove_headers.length) ? ' and ' : '') +
    (Object.keys(request.set_headers).length || request.remove_headers.length ? 'headers' : '') +
    ' to the work queue ' + state.queue + '? The original stays in its replay history.';
  if (await write('edit', request, question)) {
    $('edit').hidden = true;
    $('message').hidden = true;
  }
}

/** The edit form's buttons. */
export function wireEdit() {
  $('edit').addEventListener('submit', submitEdit);
  $('edit-cancel').addEventListener('click', () => {
    $('edit').hidden = true;
  });
}
