// The consumers: their queues' depths, polled, and the buttons that open a
// consumer's dead letters or retry tiers.

import { $, api, clearError, el, showError, state, text } from './shared.js';
import { syncRows } from './tables.js';
import { loadView, openDeadLetters } from './dead-letters.js';
import { openTiers } from './tiers.js';
import { openJobs } from './jobs.js';

const POLL_MS = 2000;
// Dead-letter queues up to this depth have their view reloaded as they change.
const AUTO_RELOAD_MAX = 1000;

function buildConsumerRow(c) {
  return el(
    'tr',
    { data: { queue: c.queue } },
    el('td', { class: 'queue' }, c.queue),
    el('td', { class: 'number work' }),
    el('td', { class: 'tiers' }),
    el('td', { class: 'number dlq' }),
    el(
      'td',
      {},
      el('button', { class: 'open', type: 'button', onclick: () => openConsumer(c.queue) }, 'Dead letters'),
      el('button', { class: 'open-tiers', type: 'button', onclick: () => openTiers(c.queue) }, 'Retry tiers'),
      el('button', { class: 'open-jobs', type: 'button', onclick: () => openJobs(c.queue) }, 'Replay jobs'),
    ),
  );
}

function updateConsumerRow(row, c) {
  row.querySelector('.work').textContent = text(c.work.messages);
  row.querySelector('.work').title = c.work.consumers + ' consumer(s)';
  row.querySelector('.tiers').replaceChildren(
    ...c.tiers.map((t) =>
      el('span', { class: 'tier', title: 'delay ' + t.delay_ms + ' ms, ' + t.consumers + ' consumer(s)' }, t.name + ': ' + t.messages),
    ),
  );
  row.querySelector('.dlq').textContent = text(c.dead_letter.messages);
  row.querySelector('.dlq').title = c.dead_letter.name;
  row.classList.toggle('selected', c.queue === state.queue);
}

function renderConsumers(consumers) {
  syncRows($('consumers').tBodies[0], consumers, (c) => c.queue, buildConsumerRow, updateConsumerRow);
  const shown = consumers.find((c) => c.queue === state.queue);
  if (shown) dlqDepthSeen(shown.dead_letter.messages);
}

/** A consumer's depths as a write answered them: shown at once. */
export function renderConsumer(c) {
  state.writes += 1;
  const row = [...$('consumers').tBodies[0].rows].find((r) => r.dataset.queue === c.queue);
  if (row) updateConsumerRow(row, c);
  state.dlqDepth = c.dead_letter.messages;
}

// The view comes from a whole pass over the dead-letter queue: reload it
// by itself only while the queue fits in a pass's window (1000), so that
// an open page never keeps moving a large queue round; search again to
// reload a larger one. Nor while a replay job runs on it: a pass beside
// the job's waves would miss the messages they hold (and they those the
// pass holds); the view is read again when the job ends.
function dlqDepthSeen(depth) {
  if (state.loading) return; // the pass under way reads it as it is
  if (state.jobsRunning.has(state.queue)) return;
  if (depth !== state.dlqDepth && depth <= AUTO_RELOAD_MAX) {
    state.dlqDepth = depth;
    loadView();
  }
}

export async function refreshConsumers() {
  const writes = state.writes;
  try {
    const consumers = await api('GET', 'consumers');
    // A write answered meanwhile with depths read after it: these may be
    // from before it, and would show the write undone until the next poll.
    if (writes !== state.writes) return;
    renderConsumers(consumers);
    clearError('poll');
    $('refreshed').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    showError('poll', 'Consumers: ' + e.message);
  }
}

export async function pollForever() {
  await refreshConsumers();
  setTimeout(pollForever, POLL_MS);
}

function markConsumer(queue) {
  for (const row of $('consumers').tBodies[0].rows) row.classList.toggle('selected', row.dataset.queue === queue);
}

function openConsumer(queue) {
  markConsumer(queue);
  openDeadLetters(queue);
  openJobs(queue);
}
