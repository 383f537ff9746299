// The dead letters of a consumer: the search, the chart of failures over
// time, the groups and a page of the messages that match.

import { $, PAGE_SIZE, api, apiUrl, clearError, consumerPath, cut, el, query, showError, state, text, timeEl } from './shared.js';
import { applySort, syncRows } from './tables.js';
import { describeSearch, searchParams } from './search.js';
import { clearSelection, renderSelection } from './selection.js';
import { showMessage } from './message.js';
import { writeGroup } from './writes.js';

const SVG = 'http://www.w3.org/2000/svg';

/** Shows the dead letters of `queue`: its groups, chart and first page. */
export function openDeadLetters(queue) {
  if (state.queue !== queue) {
    state.search = {};
    $('search').reset();
  }
  state.queue = queue;
  state.group = null;
  state.offset = 0;
  clearSelection();
  $('messages-section').hidden = true;
  $('message').hidden = true;
  $('groups-queue').textContent = queue;
  $('groups-section').hidden = false;
  $('groups').tBodies[0].replaceChildren();
  loadView();
}

/**
 * The view read again after a write: from the first page, with nothing
 * selected and no group open once the whole queue was purged or indexed
 * again; without the group open once a write of it moved all its messages.
 */
export async function reloadAfterWrite({ action, body, outcome }) {
  if (action === 'purge' || action === 'rebuild') {
    state.group = null;
    state.offset = 0;
    clearSelection();
  } else if (state.group && outcome.matched.length === state.group.count && body.group === state.group.id) {
    state.group = null;
  }
  await loadView();
}

let viewLoads = 0;
export async function loadView() {
  const queue = state.queue;
  if (!queue) return;
  const load = ++viewLoads;
  state.loading = true;
  $('view-state').textContent = 'reading…';
  const params = { ...searchParams(), group: state.group && state.group.id, offset: state.offset, limit: PAGE_SIZE };
  try {
    const view = await api('GET', consumerPath(queue, 'dead-letters' + query(params)));
    if (queue !== state.queue || load !== viewLoads) return;
    renderGroups(view.groups);
    renderGroupsSource(view);
    state.viewDepth = view.depth;
    renderChart(view.chart, view.groups);
    renderMessages(view);
    $('view-state').textContent = view.depth + ' in the queue, read ' + new Date().toLocaleTimeString();
    $('export').href = apiUrl(consumerPath(queue, 'export' + query({ ...searchParams(), group: state.group && state.group.id })));
    clearError('groups');
  } catch (e) {
    $('view-state').textContent = '';
    showError('groups', 'Dead letters of ' + queue + ': ' + e.message);
  } finally {
    if (load === viewLoads) state.loading = false;
  }
}

function renderGroups(groups) {
  syncRows(
    $('groups').tBodies[0],
    groups,
    (g) => g.id,
    (g) => {
      const actions = el('td', { class: 'actions' }, el('button', { class: 'messages', type: 'button' }, 'Messages'));
      if (!state.readOnly) {
        actions.append(
          el('button', { class: 'replay write', type: 'button' }, 'Replay'),
          el('button', { class: 'discard write danger', type: 'button' }, 'Discard'),
        );
      }
      return el(
        'tr',
        { data: { group: g.id } },
        el('td', { class: 'id' }, g.id),
        el('td', { class: 'number count' }),
        el('td', { class: 'reason' }, g.reason),
        cut('td', 'fingerprint', g.fingerprint),
        el('td', { class: 'first' }),
        el('td', { class: 'last' }),
        actions,
      );
    },
    (row, g) => {
      row.querySelector('.count').textContent = text(g.count);
      const first = row.querySelector('.first');
      first.dataset.value = text(g.first_failed_at);
      first.replaceChildren(timeEl(g.first_failed_at));
      const last = row.querySelector('.last');
      last.dataset.value = text(g.last_failed_at);
      last.replaceChildren(timeEl(g.last_failed_at));
      row.querySelector('.fingerprint').title = 'for example: ' + text(g.example_error) + ' (click to show all of it)';
      row.classList.toggle('selected', !!state.group && state.group.id === g.id);
      // The handlers see the group as it is now.
      row.querySelector('.messages').onclick = () => openGroup(g);
      const replay = row.querySelector('.replay');
      if (replay) replay.onclick = () => writeGroup('replay', g);
      const discard = row.querySelector('.discard');
      if (discard) discard.onclick = () => writeGroup('discard', g);
    },
  );
  $('groups-empty').hidden = groups.length > 0;
  if (state.group) {
    const now = groups.find((g) => g.id === state.group.id);
    if (now) state.group = now;
  }
}

/** The line under the groups: where they were read from, and why (as text). */
function renderGroupsSource(view) {
  const line = $('groups-source');
  const reason = text(view.groups_source_reason);
  line.dataset.source = text(view.groups_source);
  line.textContent = view.groups_source === 'index' ? 'From the index' : 'From a pass over the queue: ' + reason;
  line.title = reason;
}

function openGroup(group) {
  state.group = group;
  state.offset = 0;
  clearSelection();
  loadView();
}


function svg(tag, attributes, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(text(child)));
  return node;
}

function renderChart(chart, groups) {
  const figure = $('chart-figure');
  const series = chart.series || [];
  figure.hidden = series.length === 0;
  const box = $('chart');
  box.replaceChildren();
  $('chart-legend').replaceChildren();
  if (series.length === 0) return;
  const buckets = series[0].counts.length;
  const totals = Array.from({ length: buckets }, (_, i) => series.reduce((sum, s) => sum + s.counts[i], 0));
  const max = Math.max(1, ...totals);
  const width = 1000 / buckets;
  const colors = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#9c9c9c'];
  const start = Date.parse(chart.start);
  const names = new Map(groups.map((g) => [g.id, g.fingerprint]));
  for (let i = 0; i < buckets; i++) {
    let y = 160;
    const from = new Date(start + i * chart.bucket_secs * 1000);
    series.forEach((s, k) => {
      const n = s.counts[i];
      if (!n) return;
      const h = (n / max) * 150;
      y -= h;
      box.append(
        svg(
          'rect',
          { x: i * width + 0.5, y, width: Math.max(width - 1, 0.5), height: h, fill: colors[k % colors.length], class: 'bar', 'data-group': s.group },
          svg('title', {}, n + ' × ' + (names.get(s.group) || s.group) + ' from ' + from.toLocaleString()),
        ),
      );
    });
  }
  const end = new Date(start + buckets * chart.bucket_secs * 1000);
  const step = chart.bucket_secs >= 86400 ? chart.bucket_secs / 86400 + ' day(s)' : chart.bucket_secs >= 3600 ? chart.bucket_secs / 3600 + ' h' : chart.bucket_secs >= 60 ? chart.bucket_secs / 60 + ' min' : chart.bucket_secs + ' s';
  $('chart-caption').replaceChildren(
    el('span', {}, new Date(start).toLocaleString()),
    el('span', {}, 'dead letters per ' + step + ' (at most ' + max + ')' + (chart.undated ? ', ' + chart.undated + ' without a readable x-failed-at left out' : '')),
    el('span', {}, end.toLocaleString()),
  );
  $('chart-legend').replaceChildren(
    ...series.map((s, k) =>
      el('li', { title: names.get(s.group) || s.group }, el('span', { class: 'swatch s' + (k % colors.length) }), s.group === 'other' ? 'other groups' : (names.get(s.group) || s.group)),
    ),
  );
}

function renderMessages(view) {
  state.total = view.total;
  state.page = view.messages;
  $('messages-title').textContent = view.total + ' message(s) ' + (state.group ? 'of group ' + state.group.id : 'match');
  $('messages-group').textContent = state.group ? state.group.fingerprint : describeSearch();
  const first = view.total ? view.offset + 1 : 0;
  $('page-state').textContent = first + '–' + (view.offset + view.messages.length) + ' of ' + view.total;
  $('page-prev').disabled = view.offset === 0;
  $('page-next').disabled = view.offset + view.messages.length >= view.total;
  $('messages').tBodies[0].replaceChildren(
    ...view.messages.map((m) => {
      const box = el('input', { type: 'checkbox', class: 'pick', title: m.message_id ? 'select' : 'no message id: select its group or all that match' });
      box.disabled = !m.message_id || state.allMatching;
      box.checked = state.allMatching || (!!m.message_id && state.selected.has(m.message_id));
      box.addEventListener('change', () => {
        if (box.checked) state.selected.set(m.message_id, m);
        else state.selected.delete(m.message_id);
        renderSelection();
      });
      return el(
        'tr',
        { data: { messageId: m.message_id || '' } },
        el('td', {}, box),
        el('td', { class: 'number' }, m.position),
        cut('td', 'message-id', m.message_id),
        el('td', { data: { value: text(m.failed_at) } }, timeEl(m.failed_at)),
        el('td', { class: 'number' }, m.retry_count),
        cut('td', 'error', m.error),
        el('td', {}, el('button', { class: 'show', type: 'button', onclick: () => showMessage(m) }, 'Show')),
      );
    }),
  );
  applySort($('messages'));
  $('messages-section').hidden = false;
  renderSelection();
}

/** A datetime-local value (local time) as RFC 3339 in UTC. */
function isoOf(local) {
  if (!local) return undefined;
  const at = new Date(local);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/** The search, its clearing and the pages of messages. */
export function wireDeadLetters() {
  $('search').addEventListener('submit', (event) => {
    event.preventDefault();
    state.search = {
      text: $('search-text').value.trim() || undefined,
      failed_after: isoOf($('search-after').value),
      failed_before: isoOf($('search-before').value),
    };
    state.offset = 0;
    clearSelection();
    loadView();
  });
  $('search-clear').addEventListener('click', () => {
    $('search').reset();
    state.search = {};
    state.group = null;
    state.offset = 0;
    clearSelection();
    loadView();
  });
  $('page-prev').addEventListener('click', () => {
    state.offset = Math.max(0, state.offset - PAGE_SIZE);
    loadView();
  });
  $('page-next').addEventListener('click', () => {
    state.offset += PAGE_SIZE;
    loadView();
  });
}
