// The rabbit-backoff console's page. Every value from the broker is put into
// the page as text (textContent, text nodes), never parsed as HTML. The token
// is kept in memory only: taken from the URL fragment (#token=…, which the
// browser never sends) or typed in, and sent as `Authorization: Bearer …`
// with replay, edit and discard.
'use strict';

(() => {
  const POLL_MS = 2000;
  // Dead-letter queues up to this depth have their view reloaded as they change.
  const AUTO_RELOAD_MAX = 1000;
  const PAGE_SIZE = 50;
  const SVG = 'http://www.w3.org/2000/svg';

  const state = {
    token: null,
    readOnly: true,
    configured: false, // whether /api/config answered
    queue: null, // the consumer whose dead letters are shown
    dlqDepth: null, // its DLQ depth when its view was last loaded
    viewDepth: null, // the depth its view's pass found
    search: {}, // text, failed_after, failed_before
    group: null, // the group whose messages are listed
    offset: 0,
    total: 0, // messages matching the search (and group)
    page: [], // the messages listed
    selected: new Map(), // message id -> message, picked by hand
    allMatching: false, // every message the search matches is selected
    message: null, // the message shown
    errors: new Map(), // where an error came from -> its message
    sorts: new Map(), // table id -> { column, descending }
  };

  const $ = (id) => document.getElementById(id);

  // The JSON API, beside this script wherever the console is mounted
  // (`/`, `/ops/console`…): every address is relative to the script's own.
  const API = new URL('api/', import.meta.url);

  /** The address of `path` in the API. */
  function apiUrl(path) {
    return new URL(path, API).href;
  }

  /** An element with attributes and children; strings become text nodes. */
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (name === 'data') {
        for (const [key, data] of Object.entries(value)) node.dataset[key] = data;
      } else if (name === 'onclick') {
        node.addEventListener('click', value);
      } else {
        node.setAttribute(name, value);
      }
    }
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(text(child)));
    }
    return node;
  }

  function svg(tag, attributes, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(text(child)));
    return node;
  }

  function text(value) {
    return value === null || value === undefined ? '-' : String(value);
  }

  /** A cell for a long value: its first line, the whole value one click away. */
  function cut(tag, className, value) {
    const node = el(tag, { class: 'cut ' + className, title: 'click to show all of it' }, text(value));
    node.addEventListener('click', () => node.classList.toggle('open'));
    return node;
  }

  // --- times ---------------------------------------------------------------

  /** "3 min ago" or "in 12 s". */
  function relative(iso) {
    const at = Date.parse(iso);
    if (Number.isNaN(at)) return text(iso);
    const seconds = Math.round((at - Date.now()) / 1000);
    const size = Math.abs(seconds);
    let amount;
    if (size < 60) amount = size + ' s';
    else if (size < 3600) amount = Math.round(size / 60) + ' min';
    else if (size < 86400 * 2) amount = Math.round(size / 3600) + ' h';
    else amount = Math.round(size / 86400) + ' days';
    if (size < 1) return 'now';
    return seconds < 0 ? amount + ' ago' : 'in ' + amount;
  }

  /** A <time> that shows the relative time and the exact one on hover. */
  function timeEl(iso) {
    if (iso === null || iso === undefined) return el('span', {}, '-');
    const node = el('time', { datetime: text(iso) });
    renderTime(node);
    return node;
  }

  function renderTime(node) {
    const iso = node.getAttribute('datetime');
    const at = Date.parse(iso);
    node.textContent = relative(iso);
    node.title = Number.isNaN(at) ? iso : iso + ' (' + new Date(at).toLocaleString() + ')';
    node.classList.toggle('due-now', node.dataset.due === '1' && at <= Date.now());
  }

  function tickTimes() {
    for (const node of document.querySelectorAll('time[datetime]')) renderTime(node);
  }

  // --- errors and notices ---------------------------------------------------

  function showError(source, message) {
    state.errors.set(source, message);
    renderErrors();
  }

  function clearError(source) {
    state.errors.delete(source);
    renderErrors();
  }

  function renderErrors() {
    const box = $('error');
    const messages = [...state.errors.values()];
    box.textContent = messages.join('\n');
    box.hidden = messages.length === 0;
  }

  function notice(message) {
    const box = $('notice');
    box.textContent = message;
    box.hidden = false;
  }

  /** Calls the JSON API; throws an Error with the server's message. */
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (state.token) headers.Authorization = 'Bearer ' + state.token;
    const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(apiUrl(path), init);
    } catch (e) {
      throw new Error('the console does not answer: ' + e.message);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const message = data && typeof data.error === 'string' ? data.error : 'HTTP ' + response.status;
      const error = new Error(message);
      error.status = response.status;
      if (response.status === 401) askForToken();
      throw error;
    }
    return data;
  }

  function consumerPath(queue, rest) {
    return 'consumers/' + encodeURIComponent(queue) + '/' + rest;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== '') q.set(k, v);
    const s = q.toString();
    return s ? '?' + s : '';
  }

  // --- the token ---------------------------------------------------------

  function takeTokenFromFragment() {
    const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (match) {
      state.token = decodeURIComponent(match[1]);
      // Out of the address bar and the history.
      history.replaceState(null, '', location.pathname + location.search);
    }
  }

  function askForToken() {
    $('token-form').hidden = false;
    $('token').focus();
  }

  function renderToken() {
    $('token-state').textContent = state.token ? 'token set' : 'no token: replay, edit and discard will ask for it';
  }

  function hasToken() {
    if (state.token) return true;
    showError('action', 'Enter the token printed by `rabbit-backoff console` first.');
    askForToken();
    return false;
  }

  // --- sortable tables ------------------------------------------------------

  function sortValue(cell, kind) {
    const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent;
    if (kind === 'number') {
      const n = Number(raw);
      return Number.isNaN(n) ? -Infinity : n;
    }
    if (kind === 'time') {
      const t = Date.parse(raw);
      return Number.isNaN(t) ? -Infinity : t;
    }
    return raw.toLowerCase();
  }

  /** Sorts a table's rows by the column its header's click chose. */
  function applySort(table) {
    const sort = state.sorts.get(table.id);
    const headers = [...table.tHead.rows[0].cells];
    headers.forEach((th, i) => {
      if (th.dataset.sort) th.setAttribute('aria-sort', sort && sort.column === i ? (sort.descending ? 'descending' : 'ascending') : 'none');
    });
    if (!sort) return;
    const kind = headers[sort.column].dataset.sort;
    const body = table.tBodies[0];
    const rows = [...body.rows];
    rows.sort((a, b) => {
      const x = sortValue(a.cells[sort.column], kind);
      const y = sortValue(b.cells[sort.column], kind);
      const order = x < y ? -1 : x > y ? 1 : 0;
      return sort.descending ? -order : order;
    });
    for (const row of rows) body.append(row);
  }

  function makeSortable(table) {
    [...table.tHead.rows[0].cells].forEach((th, i) => {
      if (!th.dataset.sort) return;
      th.addEventListener('click', () => {
        const current = state.sorts.get(table.id);
        const descending = current && current.column === i ? !current.descending : false;
        state.sorts.set(table.id, { column: i, descending });
        applySort(table);
      });
    });
    applySort(table);
  }

  // --- consumers ---------------------------------------------------------

  /** Keeps one row per item, keyed by `key`: builds new ones, updates the others in place. */
  function syncRows(tbody, items, key, build, update) {
    const existing = new Map([...tbody.rows].map((row) => [row.dataset.key, row]));
    const rows = items.map((item) => {
      const k = key(item);
      let row = existing.get(k);
      if (!row) {
        row = build(item);
        row.dataset.key = k;
      }
      update(row, item);
      existing.delete(k);
      return row;
    });
    for (const stale of existing.values()) stale.remove();
    rows.forEach((row, i) => {
      if (tbody.rows[i] !== row) tbody.insertBefore(row, tbody.rows[i] || null);
    });
    applySort(tbody.parentElement);
  }

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
  function renderConsumer(c) {
    const row = [...$('consumers').tBodies[0].rows].find((r) => r.dataset.queue === c.queue);
    if (row) updateConsumerRow(row, c);
    state.dlqDepth = c.dead_letter.messages;
  }

  // The view comes from a whole pass over the dead-letter queue: reload it
  // by itself only while the queue fits in a pass's window (1000), so that
  // an open page never keeps moving a large queue round; search again to
  // reload a larger one.
  function dlqDepthSeen(depth) {
    if (state.loading) return; // the pass under way reads it as it is
    if (depth !== state.dlqDepth && depth <= AUTO_RELOAD_MAX) {
      state.dlqDepth = depth;
      loadView();
    }
  }

  async function refreshConsumers() {
    try {
      renderConsumers(await api('GET', 'consumers'));
      clearError('poll');
      $('refreshed').textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (e) {
      showError('poll', 'Consumers: ' + e.message);
    }
  }

  async function pollForever() {
    await refreshConsumers();
    setTimeout(pollForever, POLL_MS);
  }

  function markConsumer(queue) {
    for (const row of $('consumers').tBodies[0].rows) row.classList.toggle('selected', row.dataset.queue === queue);
  }

  function openConsumer(queue) {
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
    markConsumer(queue);
    $('groups-queue').textContent = queue;
    $('groups-section').hidden = false;
    $('groups').tBodies[0].replaceChildren();
    loadView();
  }

  // --- the dead-letters view: groups, chart, messages ------------------------

  function searchParams() {
    return {
      text: state.search.text,
      failed_after: state.search.failed_after,
      failed_before: state.search.failed_before,
    };
  }

  function describeSearch() {
    const parts = [];
    if (state.search.text) parts.push('containing "' + state.search.text + '"');
    if (state.search.failed_after) parts.push('failed after ' + state.search.failed_after);
    if (state.search.failed_before) parts.push('failed before ' + state.search.failed_before);
    if (state.group) parts.push('in group ' + state.group.id);
    return parts.length ? parts.join(', ') : 'every message';
  }

  let viewLoads = 0;
  async function loadView() {
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

  // --- selection -------------------------------------------------------------

  function clearSelection() {
    state.selected.clear();
    state.allMatching = false;
    renderSelection();
  }

  function selectedCount() {
    return state.allMatching ? state.total : state.selected.size;
  }

  function renderSelection() {
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

  // --- one message -----------------------------------------------------------

  function showMessage(m) {
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

  /** The user headers of a message (not the framework's x- ones), as `name: value` lines. */
  function editableHeaders(m) {
    return Object.entries(m.headers || {}).filter(([name]) => !name.startsWith('x-'));
  }

  async function openEdit(m) {
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

  // --- replay, edit and discard ----------------------------------------------

  async function writeGroup(action, group) {
    const question =
      action === 'replay'
        ? 'Replay the ' + group.count + ' message(s) of group ' + group.id + ' (' + group.fingerprint + ') to the work queue ' + state.queue + '?'
        : 'Discard the ' + group.count + ' message(s) of group ' + group.id + ' (' + group.fingerprint + ') for good?';
    await write(action, { group: group.id }, question);
  }

  async function write(action, body, question) {
    if (state.readOnly || !hasToken()) return false;
    if (!window.confirm(question)) return false;
    const queue = state.queue;
    try {
      const outcome = await api('POST', consumerPath(queue, action), body);
      clearError('action');
      const verb = action === 'discard' ? 'Discarded ' : action === 'edit' ? 'Replayed edited ' : 'Replayed ';
      let done = verb + outcome.matched.length + ' message(s); ' + outcome.kept + ' left in the dead-letter queue of ' + queue + ' (by ' + outcome.by + ').';
      if (outcome.skipped && outcome.skipped.length) done += ' ' + outcome.skipped.length + ' could not be replayed and stay: ' + outcome.skipped.map((s) => s.reason).join('; ');
      notice(done);
      // The depths the write read from the broker after it, shown at once.
      renderConsumer(outcome.consumer);
      if (state.group && outcome.matched.length === state.group.count && body.group === state.group.id) state.group = null;
      await loadView();
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
      renderConsumer(outcome.consumer);
      state.group = null;
      state.offset = 0;
      clearSelection();
      await loadView();
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

  // --- retry tiers -----------------------------------------------------------

  function openTiers(queue) {
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

  // --- audit -----------------------------------------------------------------

  async function loadAudit() {
    try {
      const entries = await api('GET', 'audit?limit=50');
      $('audit').tBodies[0].replaceChildren(
        ...entries.map((a) =>
          el(
            'tr',
            { class: 'entry' },
            el('td', { data: { value: a.at } }, timeEl(a.at)),
            el('td', { class: 'who' }, a.who),
            el('td', { class: 'action' }, a.action),
            cut('td', 'queue', a.queue),
            el('td', { class: 'number count' }, a.count),
            cut('td', 'what', JSON.stringify(a.selection) + (a.message_ids.length ? ' → ' + a.message_ids.join(', ') : '')),
            cut('td', 'outcome', a.error || (a.note ? 'done: ' + a.note : 'done')),
          ),
        ),
      );
      applySort($('audit'));
      $('audit-empty').hidden = entries.length > 0;
      clearError('audit');
    } catch (e) {
      showError('audit', 'Audit: ' + e.message);
    }
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
    for (const id of ['replay-selected', 'discard-selected', 'purge', 'rebuild-index']) $(id).hidden = state.readOnly;
  }

  /** A datetime-local value (local time) as RFC 3339 in UTC. */
  function isoOf(local) {
    if (!local) return undefined;
    const at = new Date(local);
    return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
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
    $('edit').addEventListener('submit', submitEdit);
    $('edit-cancel').addEventListener('click', () => {
      $('edit').hidden = true;
    });
    $('tiers-refresh').addEventListener('click', loadTiers);
    $('purge').addEventListener('click', () => writeQueue('purge'));
    $('rebuild-index').addEventListener('click', () => writeQueue('rebuild'));
    for (const table of document.querySelectorAll('table.sortable')) makeSortable(table);
  }

  async function start() {
    takeTokenFromFragment();
    wire();
    await loadConfig();
    renderToken();
    loadAudit();
    setInterval(tickTimes, 5000);
    pollForever();
  }

  start();
})();
