// The replay options of the dead-letters view: when "as a replay job" is
// ticked, a replay of a group, of the selected messages or of one message
// starts a replay job with this canary, threshold, rate and fate timeout.

import { $, state } from './shared.js';

/** The plan of a replay job as the API takes it, or null for a plain replay. */
export function jobPlan() {
  if (state.readOnly || !$('job-canary-on').checked) return null;
  const plan = {
    canary: Number($('job-canary').value),
    stop_above: $('job-stop-above').value.trim(),
  };
  const rate = $('job-rate').value.trim();
  if (rate) plan.rate = rate;
  const timeout = $('job-fate-timeout').value.trim();
  if (timeout) plan.fate_timeout = timeout;
  return plan;
}

/** A plan in words: "a canary of 20, stopped above 10% failures, …". */
export function describePlan(plan) {
  let words = 'a canary of ' + plan.canary + ', stopped above ' + plan.stop_above + ' failures';
  if (plan.rate) words += ', at most ' + plan.rate.replace(/\/s$/, '') + ' messages a second';
  if (plan.fate_timeout) words += ', fates awaited ' + plan.fate_timeout;
  return words;
}
