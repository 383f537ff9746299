// The replay jobs of a consumer, as its dead-letter queue's replay log
// tells them: where each is, how its copies fare, the canary's verdict, the
// errors of the failing copies, who started it; Pause, Resume and Stop.
// Read again every second while a job has not ended, and from the log
// after a reload (the page reopens the panel it showed).

import { $, api, clearError, consumerPath, cut, el, emit, hasToken, notice, showError, state, text, timeEl } from './shared.js';
import { syncRows } from './tables.js';
import { loadAudit } from './audit.js';
import { describePlan } from './job-options.js';

const POLL_MS = 1000;
// After an error, the panel is read again less often.
const RETRY_MS = 5000;
// The queue whose jobs are shown, kept for this tab across reloads.
const SHOWN_KEY = 'rabbit-backoff-console.replay-jobs';
const ENDED = new Set(['completed', 'stopped-on-failures', 'stopped', 'failed']);

let shown = null; // the work queue whose jobs are shown
let loads = 0;
let timer = null;
const lastStates = new Map(); // job id -> the state last shown

/** Shows the replay jobs of `queue`. */
export function openJobs(queue) {
  if (shown !== queue) {
    $('jobs').tBodies[0].replaceChildren();
    lastStates.clear();
  }
  shown = queue;
  try {
    sessionStorage.setItem(SHOWN_KEY, queue);
  } catch (_) {
    // Storage refused: the panel is opened again by hand after a reload.
  }
  $('jobs-queue').textContent = queue;
  $('jobs-section').hidden = false;
  loadJobs();
}

/** Opens again the panel this tab showed before a reload. */
export function reopenJobs() {
  let queue = null;
  try {
    queue = sessionStorage.getItem(SHOWN_KEY);
  } catch (_) {
    queue = null;
  }
  if (queue) openJobs(queue);
}

async function loadJobs() {
  clearTimeout(timer);
  timer = null;
  const queue = shown;
  if (!queue) return;
  const load = ++loads;
  let next = null;
  try {
    const jobs = await api('GET', consumerPath(queue, 'replay-jobs'));
    if (queue !== shown || load !== loads) return;
    renderJobs(queue, jobs);
    $('jobs-state').textContent = 'read ' + new Date().toLocaleTimeString();
    clearError('jobs');
    if (jobs.some((j) => !ENDED.has(j.state))) next = POLL_MS;
  } catch (e) {
    if (queue !== shown || load !== loads) return;
    showError('jobs', 'Replay jobs of ' + queue + ': ' + e.message);
    next = RETRY_MS;
  }
  if (next !== null) timer = setTimeout(loadJobs, next);
}

function renderJobs(queue, jobs) {
  const running = jobs.some((j) => !ENDED.has(j.state) && j.state !== 'interrupted');
  if (running) state.jobsRunning.add(queue);
  else state.jobsRunning.delete(queue);
  syncRows($('jobs').tBodies[0], jobs, (j) => j.id, buildJobRow, (row, j) => updateJobRow(queue, row, j));
  $('jobs-empty').hidden = jobs.length > 0;
  for (const j of jobs) {
    const before = lastStates.get(j.id);
    lastStates.set(j.id, j.state);
    // A job seen running that has ended: its copies are in the work queue.
    if (before !== undefined && !ENDED.has(before) && ENDED.has(j.state)) {
      loadAudit();
      emit('job-ended', { queue, job: j });
    }
  }
}

function buildJobRow(j) {
  return el(
    'tr',
    { data: { job: j.id } },
    el('td', { class: 'job' }, j.id, el('small', { class: 'selection' }, j.selection)),
    el('td', { class: 'state' }),
    el('td', { class: 'number sent' }),
    el('td', { class: 'number handled' }),
    el('td', { class: 'number failing' }),
    el('td', { class: 'number waiting' }),
    el('td', { class: 'canary' }),
    el('td', { class: 'errors' }),
    el('td', { class: 'who' }),
    el('td', { class: 'started', data: { value: text(j.started_at) } }, timeEl(j.started_at)),
    el('td', { class: 'actions' }),
  );
}

function updateJobRow(queue, row, j) {
  const c = j.counts;
  const stateCell = row.querySelector('.state');
  stateCell.textContent = j.state;
  stateCell.dataset.state = j.state;
  stateCell.title = stateTitle(j);
  row.querySelector('.sent').textContent = text(c.sent);
  row.querySelector('.handled').textContent = text(c.handled);
  row.querySelector('.failing').textContent = text(c.retrying + c.dead_lettered);
  row.querySelector('.failing').title = c.retrying + ' retrying, ' + c.dead_lettered + ' dead-lettered again' + (c.discarded ? ', ' + c.discarded + ' discarded' : '');
  row.querySelector('.waiting').textContent = text(c.waiting);
  row.querySelector('.canary').textContent = canaryText(j);
  row.querySelector('.errors').replaceChildren(...(j.errors.length ? j.errors.map((e) => cut('div', 'error', e.count + '× ' + e.error)) : [el('span', {}, '-')]));
  const last = j.controls.length ? j.controls[j.controls.length - 1] : null;
  row.querySelector('.who').textContent = text(j.by) + (last ? ' · ' + last.action + ' by ' + text(last.by) : '');
  // The buttons are made again only when the state changes, so that a
  // click between two reads finds the button it aimed at.
  const actions = row.querySelector('.actions');
  if (actions.dataset.state !== j.state) {
    actions.dataset.state = j.state;
    actions.replaceChildren(...buttons(queue, j));
  }
}

function stateTitle(j) {
  const o = j.outcome;
  if (!o) return j.state === 'interrupted' ? 'nothing drives it any more: resume takes it over in this console, or stop it' : 'the plan: ' + planText(j);
  if (o.outcome === 'stopped-on-failures') return o.failing + ' of ' + o.of + ' copies failed again, above ' + percent(j.plan.stop_above);
  if (o.outcome === 'stopped') return 'stopped' + (o.by ? ' by ' + o.by : '');
  if (o.outcome === 'failed') return 'failed: ' + text(o.error);
  return 'every selected message was sent';
}

/** A share (0.07) as a percentage ("7%"), without binary noise. */
function percent(share) {
  return Number((share * 100).toPrecision(12)) + '%';
}

function planText(j) {
  return describePlan({
    canary: j.plan.canary,
    stop_above: percent(j.plan.stop_above),
    rate: j.rate ? String(j.rate) : undefined,
    fate_timeout: j.plan.fate_timeout_ms / 1000 + 's',
  });
}

function canaryText(j) {
  const k = j.canary;
  if (!k) return j.state === 'canary' ? 'waiting for ' + j.plan.canary + ' fates' : '-';
  if (k.verdict === 'unwatched') return 'unwatched: no fate came';
  return k.verdict + ': ' + k.failing + ' of ' + k.of + ' failing';
}

function buttons(queue, j) {
  if (state.readOnly || ENDED.has(j.state)) return [];
  const button = (action, label, title, danger) =>
    el('button', { class: action + ' write' + (danger ? ' danger' : ''), type: 'button', title, onclick: () => control(queue, j.id, action) }, label);
  const list = [];
  if (j.state === 'paused' || j.state === 'interrupted') {
    list.push(button('resume', 'Resume', j.state === 'interrupted' ? 'nothing drives it any more: this console takes it over from its replay log' : 'go on where it paused'));
  } else {
    list.push(button('pause', 'Pause', 'send nothing more until resumed'));
  }
  list.push(button('stop', 'Stop', 'send nothing more, for good: what it has not sent stays in the dead-letter queue', true));
  return list;
}

async function control(queue, id, action) {
  if (state.readOnly || !hasToken()) return;
  if (action === 'stop' && !window.confirm('Stop replay job ' + id + ' of ' + queue + ' for good? What it has not sent stays in the dead-letter queue.')) return;
  try {
    const outcome = await api('POST', consumerPath(queue, 'replay-jobs/' + encodeURIComponent(id) + '/' + action), {});
    clearError('action');
    notice('Replay job ' + outcome.id + ': ' + action + ' asked by ' + outcome.by + '; it is ' + outcome.job.state + '.');
  } catch (e) {
    showError('action', 'Replay job ' + action + ' refused or failed: ' + e.message);
  }
  loadAudit();
  if (queue === shown) loadJobs();
}

/**
 * Starts a replay job of `selection` on `queue` with `plan`, after the
 * confirmation `question` (of the replay) extended with the plan.
 */
export async function startJob(queue, selection, plan, question) {
  const asked = question.replace(/\?$/, '') + ' as a replay job: ' + describePlan(plan) + '?';
  if (!window.confirm(asked)) return false;
  try {
    const outcome = await api('POST', consumerPath(queue, 'replay-jobs'), { ...selection, ...plan });
    clearError('action');
    state.jobsRunning.add(queue);
    notice('Replay job ' + outcome.id + ' started on ' + queue + ' by ' + outcome.by + ': ' + describePlan(plan) + '. What it does not send stays in the dead-letter queue.');
    openJobs(queue);
    loadAudit();
    return true;
  } catch (e) {
    showError('action', 'Replay job refused or failed: ' + e.message);
    loadAudit();
    return false;
  }
}
