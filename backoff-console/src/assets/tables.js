// Tables: sorted by the column whose header is clicked, and rows kept in
// place as the data under them changes.

import { state } from './shared.js';

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
export function applySort(table) {
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

export function makeSortable(table) {
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

/** Keeps one row per item, keyed by `key`: builds new ones, updates the others in place. */
export function syncRows(tbody, items, key, build, update) {
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
