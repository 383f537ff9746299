// The messages picked by hand, or every one the search matches, and the
// replay or discard of them.

import { $, state } from './shared.js';
import { describeSearch, searchParams } from './search.js';
import { write } from './writes.js';

export function clearSelection() {
  state.selected.clear();
  state.allMatching = false;
  renderSelection();
}

function selectedCount() {
  return state.allMatching ? state.total : state.selected.size;
}

export function renderSelection() {
  const count = selectedCount();
  $('selected-count').textContent = state.allMatching
    ? 'all ' + count + ' that match selected'
    : count ? count + ' selected' : 'none selected';
  for (const id of ['replay-selected', 'discard-selected']) {
    $(id).hidden = state.readOnly;
    $(id).disabled = count === 0;
  }
  $('select-matching').textContent = 'Select all ' + state.total + ' that match';
  const boxes = [...document.querySelectorAll('#messages .pick')];
  for (const box of boxes) {
    box.disabled = state.allMatching || !box.closest('tr').dataset.messageId;
    if (state.allMatching) box.checked = true;
  }
  const pickable = boxes.filter((b) => !b.disabled);
  $('select-page').checked = state.allMatching || (pickable.length > 0 && pickable.every((b) => b.checked));
}

function selectPage(on) {
  state.allMatching = false;
  for (const m of state.page) {
    if (!m.message_id) continue;
    if (on) state.selected.set(m.message_id, m);
    else state.selected.delete(m.message_id);
  }
  for (const box of document.querySelectorAll('#messages .pick')) if (!box.disabled) box.checked = on;
  renderSelection();
}

function selectionBody() {
  if (state.allMatching) {
    return { matching: { ...searchParams(), group: state.group ? state.group.id : undefined } };
  }
  return { message_ids: [...state.selected.keys()] };
}

async function writeSelected(action) {
  const count = selectedCount();
  if (!count) return;
  const what = state.allMatching ? 'all ' + count + ' message(s) that match (' + describeSearch() + ')' : 'the ' + count + ' selected message(s)';
  const question =
    action === 'replay'
      ? 'Replay ' + what + ' to the work queue ' + state.queue + '?'
      : 'Discard ' + what + ' for good?';
  if (await write(action, selectionBody(), question)) clearSelection();
}

/** The checkboxes and the buttons of the selection. */
export function wireSelection() {
  $('select-page').addEventListener('change', () => selectPage($('select-page').checked));
  $('select-matching').addEventListener('click', () => {
    state.allMatching = true;
    renderSelection();
  });
  $('select-none').addEventListener('click', () => {
    clearSelection();
    for (const box of document.querySelectorAll('#messages .pick')) box.checked = false;
    renderSelection();
  });
  $('replay-selected').addEventListener('click', () => writeSelected('replay'));
  $('discard-selected').addEventListener('click', () => writeSelected('discard'));
}
