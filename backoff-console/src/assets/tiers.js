// What waits in a consumer's retry tiers, and when it is due.

import { $, PAGE_SIZE, api, clearError, consumerPath, cut, el, query, showError, text, timeEl } from './shared.js';
import { makeSortable } from './tables.js';

export function openTiers(queue) {
  $('tiers-queue').textContent = queue;
  $('tiers-section').hidden = false;
  $('tiers-section').dataset.queue = queue;
  loadTiers();
}

async function loadTiers() {
  const queue = $('tiers-section').dataset.queue;
  if (!queue) return;
  try {
    const tiers = await api('GET', consumerPath(queue, 'tiers' + query({ limit: PAGE_SIZE })));
    $('tiers').replaceChildren(...tiers.map(renderTier));
    clearError('tiers');
  } catch (e) {
    showError('tiers', 'Retry tiers of ' + queue + ': ' + e.message);
  }
}

function renderTier(t) {
  const title = el('h3', {}, t.queue + ' ', el('small', {}, 'delay ' + t.delay_ms / 1000 + ' s'));
  if (!t.listing) return el('div', { class: 'tier-listing', data: { queue: t.queue } }, title, el('p', { class: 'hint' }, text(t.note)));
  const l = t.listing;
  title.append(el('small', {}, ' · ' + l.depth + ' waiting' + (l.depth > l.messages.length ? ', the first ' + l.messages.length + ' listed' : '')));
  if (l.messages.length === 0) return el('div', { class: 'tier-listing', data: { queue: t.queue } }, title, el('p', { class: 'hint' }, 'Nothing waiting.'));
  const table = el(
    'table',
    { class: 'sortable tier-table', id: 'tier-' + t.queue.replace(/[^A-Za-z0-9_-]/g, '_') },
    el('colgroup', {}, el('col', { class: 'w-num' }), el('col'), el('col', { class: 'w-num' }), el('col', { class: 'w-time' }), el('col', { class: 'w-time' }), el('col')),
    el('thead', {}, el('tr', {}, el('th', { 'data-sort': 'number' }, '#'), el('th', { 'data-sort': 'text' }, 'Message id'), el('th', { 'data-sort': 'number' }, 'Retry'), el('th', { 'data-sort': 'time' }, 'Entered'), el('th', { 'data-sort': 'time' }, 'Due'), el('th', {}, 'Body'))),
    el(
      'tbody',
      {},
      ...l.messages.map((m) => {
        const due = timeEl(m.due_at);
        due.dataset.due = '1';
        // A first retry copy carries no x-retried-at unless its consumer has a max_age.
        if (!m.due_at) due.textContent = m.retry_count === 1 ? 'within ' + t.delay_ms / 1000 + ' s (a first retry is not stamped)' : 'unknown (no x-retried-at)';
        return el(
          'tr',
          { data: { messageId: m.message_id || '' } },
          el('td', { class: 'number' }, m.position),
          cut('td', 'message-id', m.message_id),
          el('td', { class: 'number' }, m.retry_count),
          el('td', { data: { value: text(m.entered_at) } }, timeEl(m.entered_at)),
          el('td', { class: 'due', data: { value: text(m.due_at) } }, due),
          cut('td', 'body', m.body_preview),
        );
      }),
    ),
  );
  makeSortable(table);
  return el('div', { class: 'tier-listing', data: { queue: t.queue } }, title, table);
}

/** The tiers' refresh button. */
export function wireTiers() {
  $('tiers-refresh').addEventListener('click', loadTiers);
}
