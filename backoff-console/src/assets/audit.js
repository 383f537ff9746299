// The audit: the latest writes, who made them and how they ended.

import { $, api, clearError, cut, el, showError, timeEl } from './shared.js';
import { applySort } from './tables.js';

export async function loadAudit() {
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
          cut('td', 'what', (a.job ? 'job ' + a.job + ': ' : '') + JSON.stringify(a.selection) + (a.message_ids.length ? ' → ' + a.message_ids.join(', ') : '')),
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
