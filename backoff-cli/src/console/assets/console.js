// The rabbit-backoff console's page. Every value from the broker is put into
// the page as text (textContent, text nodes), never parsed as HTML. The token
// is kept in memory only: taken from the URL fragment (#token=…, which the
// browser never sends) or typed in, and sent as `Authorization: Bearer …`
// with replay and discard.
'use strict';

(() => {
  const POLL_MS = 2000;
  // Dead-letter queues up to this depth have their groups reloaded as they change.
  const AUTO_GROUPS_MAX = 1000;
  const MESSAGES_LISTED = 50;

  const state = {
    token: null,
    readOnly: true,
    configured: false, // whether /api/config answered
    queue: null, // the consumer whose dead letters are shown
    dlqDepth: null, // its DLQ depth when its groups were last loaded
    group: null, // the group whose messages are listed
    errors: new Map(), // where an error came from -> its message
  };

  const $ = (id) => document.getElementById(id);

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

  function text(value) {
    return value === null || value === undefined ? '-' : String(value);
  }

  function short(value, length) {
    const s = text(value);
    return s.length > length ? s.slice(0, length) + '…' : s;
  }

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
      response = await fetch(path, init);
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
    return '/api/consumers/' + encodeURIComponent(queue) + '/' + rest;
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
    $('token-state').textContent = state.token ? 'token set' : 'no token: replay and discard will ask for it';
  }

  function hasToken() {
    if (state.token) return true;
    showError('action', 'Enter the token printed by `rabbit-backoff console` first.');
    askForToken();
    return false;
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
  }

  function renderConsumers(consumers) {
    syncRows(
      $('consumers').tBodies[0],
      consumers,
      (c) => c.queue,
      (c) =>
        el(
          'tr',
          { data: { queue: c.queue } },
          el('td', { class: 'queue' }, c.queue),
          el('td', { class: 'number work' }),
          el('td', { class: 'tiers' }),
          el('td', { class: 'number dlq' }),
          el('td', {}, el('button', { class: 'open', type: 'button', onclick: () => openConsumer(c.queue) }, 'Dead letters')),
        ),
      (row, c) => {
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
      },
    );
    const shown = consumers.find((c) => c.queue === state.queue);
    // Groups come from a whole pass over the dead-letter queue: reload them
    // by themselves only while the queue fits in a pass's window (1000), so
    // that an open page never keeps moving a large queue round; click the
    // consumer again to reload a larger one.
    if (
      shown &&
      shown.dead_letter.messages !== state.dlqDepth &&
      shown.dead_letter.messages <= AUTO_GROUPS_MAX
    ) {
      state.dlqDepth = shown.dead_letter.messages;
      loadGroups();
    }
  }

  async function refreshConsumers() {
    try {
      renderConsumers(await api('GET', '/api/consumers'));
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

  function openConsumer(queue) {
    state.queue = queue;
    state.group = null;
    $('messages-section').hidden = true;
    $('message').hidden = true;
    for (const row of $('consumers').tBodies[0].rows) {
      row.classList.toggle('selected', row.dataset.queue === queue);
    }
    $('groups-queue').textContent = queue;
    $('groups-section').hidden = false;
    $('groups').tBodies[0].replaceChildren();
    loadGroups();
  }

  // --- groups ------------------------------------------------------------

  async function loadGroups() {
    const queue = state.queue;
    if (!queue) return;
    try {
      const groups = await api('GET', consumerPath(queue, 'groups'));
      if (queue !== state.queue) return;
      renderGroups(groups);
      clearError('groups');
    } catch (e) {
      showError('groups', 'Dead-letter groups of ' + queue + ': ' + e.message);
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
          el('td', { class: 'fingerprint', title: 'for example: ' + text(g.example_error) }, g.fingerprint),
          el('td', { class: 'first' }),
          el('td', { class: 'last' }),
          actions,
        );
      },
      (row, g) => {
        row.querySelector('.count').textContent = text(g.count);
        row.querySelector('.first').textContent = text(g.first_failed_at);
        row.querySelector('.last').textContent = text(g.last_failed_at);
        // The handlers see the group as it is now.
        row.querySelector('.messages').onclick = () => loadMessages(g);
        const replay = row.querySelector('.replay');
        if (replay) replay.onclick = () => writeGroup('replay', g);
        const discard = row.querySelector('.discard');
        if (discard) discard.onclick = () => writeGroup('discard', g);
      },
    );
    $('groups-empty').hidden = groups.length > 0;
    if (state.group && !groups.some((g) => g.id === state.group.id)) {
      state.group = null;
      $('messages-section').hidden = true;
    }
  }

  // --- messages ----------------------------------------------------------

  async function loadMessages(group) {
    const queue = state.queue;
    state.group = group;
    const query = '?group=' + encodeURIComponent(group.id) + '&limit=' + MESSAGES_LISTED;
    try {
      const report = await api('GET', consumerPath(queue, 'messages' + query));
      if (queue !== state.queue) return;
      $('messages-group').textContent = group.id + ' (' + group.fingerprint + ')';
      $('messages').tBodies[0].replaceChildren(
        ...report.matched.map((m) =>
          el(
            'tr',
            { data: { messageId: m.message_id || '' } },
            el('td', { class: 'number' }, m.position),
            el('td', { class: 'message-id' }, m.message_id),
            el('td', {}, m.failed_at),
            el('td', { class: 'number' }, m.retry_count),
            el('td', { class: 'error' }, short(m.error, 120)),
            el('td', {}, el('button', { class: 'show', type: 'button', onclick: () => showMessage(m) }, 'Show')),
          ),
        ),
      );
      $('messages-section').hidden = false;
      clearError('messages');
    } catch (e) {
      showError('messages', 'Messages: ' + e.message);
    }
  }

  function showMessage(m) {
    $('message-id').textContent = text(m.message_id);
    const fields = [
      ['Message id', m.message_id],
      ['Group', m.group],
      ['Original queue', m.original_queue],
      ['Routing key', m.routing_key],
      ['Reason', m.reason],
      ['Retry count', m.retry_count],
      ['Failed at', m.failed_at],
      ['Correlation id', m.correlation_id],
      ['Redelivered', m.redelivered],
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
    for (const [id, action] of [['message-replay', 'replay'], ['message-discard', 'discard']]) {
      const button = $(id);
      button.hidden = state.readOnly;
      button.disabled = !m.message_id;
      button.title = m.message_id ? '' : 'no message id: replay or discard its group instead';
      button.onclick = () => writeMessage(action, m);
    }
    $('message').hidden = false;
  }

  // --- replay and discard --------------------------------------------------

  async function writeGroup(action, group) {
    const question =
      action === 'replay'
        ? 'Replay the ' + group.count + ' message(s) of group ' + group.id + ' (' + group.fingerprint + ') to the work queue ' + state.queue + '?'
        : 'Discard the ' + group.count + ' message(s) of group ' + group.id + ' (' + group.fingerprint + ') for good?';
    await write(action, { group: group.id }, question);
  }

  async function writeMessage(action, m) {
    const question =
      action === 'replay'
        ? 'Replay message ' + m.message_id + ' to the work queue ' + state.queue + '?'
        : 'Discard message ' + m.message_id + ' for good?';
    if (await write(action, { message_id: m.message_id }, question)) $('message').hidden = true;
  }

  async function write(action, selection, question) {
    if (state.readOnly || !hasToken()) return false;
    if (!window.confirm(question)) return false;
    const queue = state.queue;
    try {
      const report = await api('POST', consumerPath(queue, action), selection);
      clearError('action');
      let done = (action === 'replay' ? 'Replayed ' : 'Discarded ') + report.matched.length + ' message(s); ' + report.kept + ' left in the dead-letter queue of ' + queue + '.';
      if (report.skipped && report.skipped.length) done += ' ' + report.skipped.length + ' could not be replayed and stay: ' + report.skipped.map((s) => s.reason).join('; ');
      notice(done);
      await loadGroups();
      if (state.group) await loadMessages(state.group);
      await refreshConsumers();
      return true;
    } catch (e) {
      showError('action', (action === 'replay' ? 'Replay' : 'Discard') + ' refused or failed: ' + e.message);
      return false;
    }
  }

  // --- start ---------------------------------------------------------------

  /** Whether the console is read-only; off loopback, reading it needs the token. */
  async function loadConfig() {
    try {
      const config = await api('GET', '/api/config');
      state.readOnly = config.read_only;
      state.configured = true;
      clearError('config');
    } catch (e) {
      showError('config', 'Console: ' + e.message);
    }
    $('mode').textContent = state.readOnly ? 'read-only' : 'replay and discard need the token';
    $('mode').classList.toggle('read-only', state.readOnly);
    if (!state.readOnly) $('token-form').hidden = false;
  }

  async function start() {
    takeTokenFromFragment();
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
    await loadConfig();
    renderToken();
    pollForever();
  }

  start();
})();
