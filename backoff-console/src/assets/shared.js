// What the console's views share: the state of the page, the JSON API (with
// the token), elements built from text, times, the error and notice areas.
// Every value from the broker is put into the page as text (textContent,
// text nodes), never parsed as HTML. The token is kept in memory only: taken
// from the URL fragment (#token=…, which the browser never sends) or typed
// in, and sent as `Authorization: Bearer …` with replay, edit and discard.

/** How many messages a page of a list shows. */
export const PAGE_SIZE = 50;

export const state = {
  token: null,
  readOnly: true,
  configured: false, // whether /api/config answered
  queue: null, // the consumer whose dead letters are shown
  dlqDepth: null, // its DLQ depth when its view was last loaded
  writes: 0, // writes whose depths were shown: a poll begun before one is stale
  viewDepth: null, // the depth its view's pass found
  search: {}, // text, failed_after, failed_before
  group: null, // the group whose messages are listed
  offset: 0,
  total: 0, // messages matching the search (and group)
  page: [], // the messages listed
  selected: new Map(), // message id -> message, picked by hand
  allMatching: false, // every message the search matches is selected
  jobsRunning: new Set(), // work queues with a replay job running, as last read
  message: null, // the message shown
  errors: new Map(), // where an error came from -> its message
  sorts: new Map(), // table id -> { column, descending }
};

export const $ = (id) => document.getElementById(id);

// The JSON API, beside this script wherever the console is mounted
// (`/`, `/ops/console`…): every address is relative to the script's own.
const API = new URL('api/', import.meta.url);

/** The address of `path` in the API. */
export function apiUrl(path) {
  return new URL(path, API).href;
}

/** An element with attributes and children; strings become text nodes. */
export function el(tag, attributes, ...children) {
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

export function text(value) {
  return value === null || value === undefined ? '-' : String(value);
}

/** A cell for a long value: its first line, the whole value one click away. */
export function cut(tag, className, value) {
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
export function timeEl(iso) {
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

export function tickTimes() {
  for (const node of document.querySelectorAll('time[datetime]')) renderTime(node);
}

// --- errors and notices ---------------------------------------------------

export function showError(source, message) {
  state.errors.set(source, message);
  renderErrors();
}

export function clearError(source) {
  state.errors.delete(source);
  renderErrors();
}

function renderErrors() {
  const box = $('error');
  const messages = [...state.errors.values()];
  box.textContent = messages.join('\n');
  box.hidden = messages.length === 0;
}

export function notice(message) {
  const box = $('notice');
  box.textContent = message;
  box.hidden = false;
}

/** Calls the JSON API; throws an Error with the server's message. */
export async function api(method, path, body) {
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

export function consumerPath(queue, rest) {
  return 'consumers/' + encodeURIComponent(queue) + '/' + rest;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}

// --- events ----------------------------------------------------------------

// What a module did, announced to those that show its effects: console.js,
// which knows every view, wires them, so that no view calls another back.
const listeners = new Map();

/** Calls `listener` with what every `emit(name, …)` announces. */
export function on(name, listener) {
  if (!listeners.has(name)) listeners.set(name, []);
  listeners.get(name).push(listener);
}

/** Announces `detail` as `name`; done once every listener is. */
export async function emit(name, detail) {
  await Promise.all((listeners.get(name) || []).map((listener) => listener(detail)));
}

// --- the token ---------------------------------------------------------

function askForToken() {
  $('token-form').hidden = false;
  $('token').focus();
}

export function hasToken() {
  if (state.token) return true;
  showError('action', 'Enter the token printed by `rabbit-backoff console` first.');
  askForToken();
  return false;
}
