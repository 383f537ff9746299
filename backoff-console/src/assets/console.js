// The rabbit-backoff console's page: loads the configuration, takes the
// token, wires every view's controls and what a write changes, and starts
// polling. Each view is a module beside this one (imported by relative
// address, so the page works wherever the console is mounted); shared.js
// holds what they share.

import { $, api, clearError, on, showError, state, tickTimes } from './shared.js';
import { makeSortable } from './tables.js';
import { pollForever, refreshConsumers, renderConsumer } from './consumers.js';
import { loadView, reloadAfterWrite, wireDeadLetters } from './dead-letters.js';
import { wireSelection } from './selection.js';
import { wireEdit } from './edit.js';
import { wireTiers } from './tiers.js';
import { wireQueueWrites } from './writes.js';
import { loadAudit } from './audit.js';
import { reopenJobs } from './jobs.js';

// --- the token ---------------------------------------------------------

function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (match) {
    state.token = decodeURIComponent(match[1]);
    // Out of the address bar and the history.
    history.replaceState(null, '', location.pathname + location.search);
  }
}

function renderToken() {
  $('token-state').textContent = state.token ? 'token set' : 'no token: replay, edit and discard will ask for it';
}

// --- start ---------------------------------------------------------------

/** Whether the console is read-only; off loopback, reading it needs the token. */
async function loadConfig() {
  try {
    const config = await api('GET', 'config');
    state.readOnly = config.read_only;
    state.configured = true;
    $('audit-path').textContent = config.audit_log ? 'recorded in ' + config.audit_log : 'no audit log';
    clearError('config');
  } catch (e) {
    showError('config', 'Console: ' + e.message);
  }
  $('mode').textContent = state.readOnly ? 'read-only' : 'replay, edit, discard and purge need the token';
  $('mode').classList.toggle('read-only', state.readOnly);
  if (!state.readOnly) $('token-form').hidden = false;
  for (const id of ['replay-selected', 'discard-selected', 'purge', 'rebuild-index', 'job-options']) $(id).hidden = state.readOnly;
}

function wire() {
  $('token-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = $('token').value.trim();
    state.token = value || null;
    $('token').value = '';
    clearError('action');
    renderToken();
    if (!state.configured) await loadConfig();
    refreshConsumers();
  });
  wireDeadLetters();
  wireSelection();
  wireEdit();
  wireTiers();
  wireQueueWrites();
  // A write done: the depths it read from the broker after it, shown at
  // once, then the view read again.
  on('written', async (written) => {
    renderConsumer(written.outcome.consumer);
    await reloadAfterWrite(written);
  });
  // A replay job ended: its copies left the dead-letter queue.
  on('job-ended', async ({ queue }) => {
    await refreshConsumers();
    if (queue === state.queue) await loadView();
  });
  for (const table of document.querySelectorAll('table.sortable')) makeSortable(table);
}

async function start() {
  takeTokenFromFragment();
  wire();
  await loadConfig();
  renderToken();
  loadAudit();
  reopenJobs();
  setInterval(tickTimes, 5000);
  pollForever();
}

start();
