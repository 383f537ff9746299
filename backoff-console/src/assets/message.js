// One dead letter: its fields, error, headers, replay history and body,
// and its own replay and discard.

import { $, el, state, text, timeEl } from './shared.js';
import { openEdit } from './edit.js';
import { write } from './writes.js';

export function showMessage(m) {
  state.message = m;
  $('edit').hidden = true;
  $('message-id').textContent = text(m.message_id);
  const fields = [
    ['Message id', m.message_id],
    ['Group', m.group],
    ['Original queue', m.original_queue],
    ['Routing key', m.routing_key],
    ['Reason', m.reason],
    ['Retry count', m.retry_count],
    ['Failed at', timeEl(m.failed_at)],
    ['Correlation id', m.correlation_id],
    [
      'Redelivered',
      m.redelivered
        ? 'true: the broker sets it on every message that was handed out and returned, and each read of this console (or of `dlq peek`) hands the queue\'s messages out and returns them; it says nothing about the handler'
        : 'false',
    ],
    ['Position in the queue', m.position],
  ];
  $('message-fields').replaceChildren(...fields.flatMap(([name, value]) => [el('dt', {}, name), el('dd', {}, value)]));
  $('message-error').textContent = text(m.error);
  const headers = Object.entries(m.headers || {});
  $('message-headers').tBodies[0].replaceChildren(
    ...(headers.length
      ? headers.map(([name, value]) => el('tr', {}, el('th', {}, name), el('td', {}, value)))
      : [el('tr', {}, el('td', {}, 'none besides the failure headers above'))]),
  );
  const history = (m.headers || {})['x-replay-history'];
  $('message-history').textContent = history === undefined ? 'never replayed' : history;
  $('message-body').textContent = m.body_preview;
  $('message-body-len').textContent =
    m.body_len + ' bytes' + (m.body_len > m.body_preview.length ? ', the first ones shown' : '');
  for (const [id, action] of [['message-replay', 'replay'], ['message-discard', 'discard'], ['message-edit', 'edit']]) {
    const button = $(id);
    button.hidden = state.readOnly;
    button.disabled = !m.message_id;
    button.title = m.message_id ? '' : 'no message id: replay or discard its group instead';
    button.onclick = action === 'edit' ? () => openEdit(m) : () => writeMessage(action, m);
  }
  $('message').hidden = false;
}

async function writeMessage(action, m) {
  const question =
    action === 'replay'
      ? 'Replay message ' + m.message_id + ' to the work queue ' + state.queue + '?'
      : 'Discard message ' + m.message_id + ' for good?';
  if (await write(action, { message_id: m.message_id }, question)) $('message').hidden = true;
}
