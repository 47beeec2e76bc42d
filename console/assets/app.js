// The console's pages. Everything is built with DOM calls and textContent (never innerHTML), so
// no value read from the database can become markup; the Content-Security-Policy allows only the
// console's own files as script (this one and workflow.js, the workflow page).
'use strict';

const REFRESH_MS = 2000;
// The job states come from the server's one list (/api/session), read before any page is drawn.
let STATES = [];
let QUEUE_STATES = [];
let CANCELLABLE = [];
let RETRYABLE = [];
const SVG_NS = 'http://www.w3.org/2000/svg';

let csrf = null;
let refreshTimer = null;
let renders = 0;
// What an operator typed as the reason of an action, by job id: kept across live refreshes.
const reasons = new Map();

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') node.textContent = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v);
  }
  return node;
}

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, body) {
  const opts = { credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    opts.method = 'POST';
    opts.headers['Content-Type'] = 'application/json';
    if (csrf) opts.headers['X-CSRF-Token'] = csrf;
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new HttpError(res.status, data.error || res.statusText);
  return data;
}

function ago(ms) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.abs(ms) / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  if (s < 3600) return (s / 60).toFixed(1) + ' min';
  if (s < 86400) return (s / 3600).toFixed(1) + ' h';
  return (s / 86400).toFixed(1) + ' d';
}

function timeOf(us) {
  return us === null || us === undefined ? '—' : new Date(us / 1000).toISOString().replace('T', ' ').slice(0, 23);
}

function stateBadge(state) { return el('span', { class: 'state ' + state, text: state }); }
function jobLink(id) { return el('a', { href: '#/job/' + id, text: '#' + id }); }

function setStatus(text, isError) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = isError ? 'error' : '';
}

// ---- overview ----

function chart(perMinute) {
  const w = 600, h = 90, pad = 14, max = Math.max(1, ...perMinute);
  const root = svg('svg', { class: 'chart', viewBox: `0 0 ${w} ${h}`, role: 'img',
                            'aria-label': 'completions per minute over the last hour' });
  const bw = (w - pad) / perMinute.length;
  perMinute.forEach((n, i) => {
    const bh = (h - 2 * pad) * n / max;
    const bar = svg('rect', { class: 'bar', x: pad + i * bw + 0.5, y: h - pad - bh,
                              width: Math.max(1, bw - 1), height: bh });
    bar.append(svg('title', { text: `${60 - i} min ago: ${n}` }));
    root.append(bar);
  });
  root.append(svg('line', { class: 'axis', x1: pad, y1: h - pad, x2: w, y2: h - pad }));
  root.append(svg('text', { x: pad, y: h - 2, text: '-60 min' }));
  root.append(svg('text', { x: w - 30, y: h - 2, text: 'now' }));
  root.append(svg('text', { x: 0, y: pad - 4, text: 'max ' + max + '/min' }));
  return root;
}

function capped(n, cap) {
  return n > cap ? cap.toLocaleString('en') + '+' : n.toLocaleString('en');
}

// An action, which the server records with why: refused here while the reason typed under `key`
// is empty (`why` says so). Its outcome, `done(answer)` or the error under `subject`, is shown in
// #action-result; then the page is drawn again.
async function act({ key, path, body = {}, subject, done, why = 'Say why: the reason is recorded in the audit log.' }) {
  const reason = (reasons.get(key) || '').trim();
  const out = document.getElementById('action-result');
  if (!reason) {
    out.textContent = why;
    out.className = 'error';
    return;
  }
  try {
    const r = await api(path, { ...body, reason });
    reasons.delete(key);
    out.textContent = done(r);
    out.className = 'ok';
  } catch (e) {
    out.textContent = `${subject}: ${e.message}`;
    out.className = 'error';
  }
  await render(false);
}

async function setPaused(org, queue, paused) {
  await act({
    key: `queue:${org}:${queue}`,
    path: `/api/queues/${org}/${encodeURIComponent(queue)}/${paused ? 'pause' : 'resume'}`,
    subject: `Queue ${queue}`,
    why: 'Say why: the reason is recorded in the queue\'s audit log.',
    done: (r) => `Queue ${r.queue} of organization ${r.org_id} ${r.paused ? 'paused' : 'resumed'} (${r.by}).`,
  });
}

// How fast a backlog drains: completions a second over the last minute, and the time the pending
// jobs take at that rate ('—' while nothing completed: no rate, no time to tell). A pending count
// past the exact-count cap is a floor (≥), the planner's estimate an approximation (≈).
function drainRate(d) { return d.rate_per_s.toFixed(d.rate_per_s < 10 ? 2 : 1) + '/s'; }
function drainLeft(d) {
  if (d.time_left_ms === null || d.time_left_ms === undefined) return '—';
  return (d.at_least ? '≥ ' : d.estimated ? '≈ ' : '') + ago(d.time_left_ms);
}

// A queue's rate limit: claims a second, how many at once, and the tokens its bucket holds now.
function rateText(q) {
  if (q.rate_per_s === null || q.rate_per_s === undefined) return '—';
  return `${q.rate_per_s}/s, burst ${q.rate_burst}, ${q.rate_tokens} left`;
}

// A queue's weight among the weighted queues served with it, and its aging: one priority more per
// so many seconds a pending job waits.
function shareText(q) {
  const parts = [];
  if (q.weight !== null && q.weight !== undefined) parts.push(`weight ${q.weight}`);
  if (q.aging_s !== null && q.aging_s !== undefined) parts.push(`+1 per ${q.aging_s}s`);
  return parts.length ? parts.join(', ') : '—';
}

// Every queue of every organization on the page in one table, deepest backlog first: which queue
// is backing up is the question, whichever organization it belongs to.
function queueTable(organizations, cap) {
  const all = organizations.flatMap((o) => o.queues.map((q) => Object.assign({ org_id: o.org_id }, q)));
  if (all.length === 0) return el('p', { class: 'muted', text: 'No queue holds work.' });
  all.sort((a, b) => (b.counts.pending - a.counts.pending) || (a.org_id - b.org_id) || a.queue.localeCompare(b.queue));
  const rows = all.map((q) => {
    const key = `queue:${q.org_id}:${q.queue}`;
    const input = el('input', { class: 'reason', placeholder: 'why (recorded)', value: reasons.get(key) || '',
                                oninput: (e) => reasons.set(key, e.target.value) });
    return el('tr', { 'data-org': q.org_id, 'data-queue': q.queue, class: q.paused ? 'paused' : null },
      el('td', { text: q.org_id }),
      el('td', {}, el('a', { href: `#/jobs?org=${q.org_id}&queue=${encodeURIComponent(q.queue)}`, text: q.queue })),
      el('td', { class: 'switch', text: q.paused ? 'paused' : 'running' }),
      el('td', { text: q.max_assigned === null ? '—' : q.max_assigned }),
      el('td', { class: 'rate', text: rateText(q) }),
      el('td', { class: 'share', text: shareText(q) }),
      QUEUE_STATES.map((s) => el('td', { class: 'n', 'data-state': s, text: capped(q.counts[s], cap) })),
      el('td', { text: ago(q.oldest_pending_age_ms) }),
      el('td', { class: 'n done', text: q.drain.completed_last_minute }),
      el('td', { class: 'n drain-rate', text: drainRate(q.drain) }),
      el('td', { class: 'n time-left', text: drainLeft(q.drain) }),
      el('td', { class: 'actions' }, input, ' ',
        el('button', { type: 'button', class: q.paused ? 'resume' : 'pause secondary',
                       onclick: () => setPaused(q.org_id, q.queue, !q.paused), text: q.paused ? 'Resume' : 'Pause' })));
  });
  return el('table', { id: 'queues', class: 'queues' },
    el('thead', {}, el('tr', {}, ['org', 'queue', 'switch', 'limit', 'rate', 'share', ...QUEUE_STATES, 'oldest pending', 'done last min', 'rate', 'time left', 'action'].map((h) => el('th', { text: h })))),
    el('tbody', {}, rows));
}

async function renderOverview(view) {
  const data = await api('/api/overview');
  const cards = el('div', { class: 'cards' });
  for (const o of data.organizations) {
    const counts = el('div', { class: 'counts' });
    for (const s of STATES) {
      const n = o.counts[s];
      counts.append(el('div', { class: 'count', 'data-org': o.org_id, 'data-state': s },
        el('div', { class: 'n', text: (o.estimated[s] ? '≈' : '') + n.toLocaleString('en') }),
        el('div', { class: 'label', text: s })));
    }
    const rejections = Object.entries(o.rejections);
    const perMinute = o.completions_per_minute;
    cards.append(el('div', { class: 'card', 'data-org': o.org_id },
      el('h2', { text: 'Organization ' + o.org_id }),
      counts,
      el('div', { class: 'facts' },
        el('span', {}, 'leases out ', el('b', { class: 'leases-out', text: o.leases_out })),
        el('span', {}, 'expired, not reclaimed ', el('b', { text: o.leases_expired })),
        el('span', {}, 'oldest pending ', el('b', { text: ago(o.oldest_pending_age_ms) })),
        el('span', {}, 'completed last hour ', el('b', { text: perMinute.reduce((a, b) => a + b, 0) }))),
      el('div', { class: 'facts drain' },
        el('span', {}, 'last minute ', el('b', { class: 'drain-rate', text: drainRate(o.drain) })),
        el('span', {}, 'time left ', el('b', { class: 'time-left', text: drainLeft(o.drain) }))),
      el('div', { class: 'facts workers' }, 'workers connected: ',
        o.coordinators.length === 0 ? el('span', { text: 'none' })
          : o.coordinators.map((c) => el('span', { 'data-coordinator': c.coordinator, title: `${c.endpoint}, heard ${ago(c.seen_ms_ago)} ago` },
            c.coordinator + ' ', el('b', { text: c.workers })))),
      chart(perMinute),
      el('div', { class: 'facts' }, 'rejections (1 h): ',
        rejections.length === 0 ? el('span', { text: 'none' })
          : rejections.map(([r, n]) => el('span', {}, r + ' ', el('b', { text: n }))))));
  }
  view.replaceChildren(el('h1', { text: 'Overview' }), actionResult(),
    el('div', { class: 'facts drain', id: 'drain-total' }, 'in total: ',
      el('span', {}, el('b', { text: data.drain.pending.toLocaleString('en') }), ' pending'),
      el('span', {}, 'last minute ', el('b', { class: 'drain-rate', text: drainRate(data.drain) })),
      el('span', {}, 'time left ', el('b', { class: 'time-left', text: drainLeft(data.drain) }))),
    data.organizations.length === 0 ? el('p', { class: 'muted', text: 'No jobs yet.' }) : cards,
    el('h2', { class: 'section', text: 'Queues' }), queueTable(data.organizations, data.exact_count_cap),
    el('p', { class: 'muted', text: `Counts above ${data.exact_count_cap.toLocaleString('en')} per state are the planner's estimates (≈).` }));
}

// ---- leases ----

async function resolveLease(lease, action) {
  await act({
    key: lease.id,
    path: `/api/leases/${lease.id}/${action}`,
    body: { generation: lease.generation },
    subject: `Job #${lease.id}`,
    done: (r) => `Job #${lease.id} taken from ${r.taken_from}: now ${r.state} (${r.by}).`,
  });
}

function actionResult() {
  const previous = document.getElementById('action-result');
  return el('p', { id: 'action-result', class: previous ? previous.className : null,
                   text: previous ? previous.textContent : '' });
}

async function renderLeases(view) {
  const data = await api('/api/leases');
  const rows = data.leases.map((l) => {
    const cls = l.time_left_ms <= 0 ? 'expired' : l.time_left_ms < 10000 ? 'expiring' : '';
    const input = el('input', { class: 'reason', placeholder: 'why (recorded)', value: reasons.get(l.id) || '',
                                oninput: (e) => reasons.set(l.id, e.target.value) });
    return el('tr', { class: cls || null, 'data-job': l.id },
      el('td', {}, jobLink(l.id)), el('td', { text: l.org_id }), el('td', { text: l.holder }),
      el('td', { text: l.generation }), el('td', { text: `${l.attempts}/${l.max_attempts}` }),
      el('td', { text: timeOf(l.claimed_us) }),
      el('td', { text: l.renewed_us ? ago(data.now_us / 1000 - l.renewed_us / 1000) + ' ago' : '—' }),
      el('td', { class: 'left', text: l.time_left_ms <= 0 ? 'expired ' + ago(l.time_left_ms) + ' ago' : ago(l.time_left_ms) }),
      el('td', { class: 'actions' }, input, ' ',
        el('button', { type: 'button', class: 'release secondary', onclick: () => resolveLease(l, 'release'), text: 'Take back' }), ' ',
        el('button', { type: 'button', class: 'fail danger', onclick: () => resolveLease(l, 'fail'), text: 'Fail' })));
  });
  view.replaceChildren(el('h1', { text: `Live leases (${data.leases.length})` }), actionResult(),
    el('table', { id: 'leases' },
      el('thead', {}, el('tr', {}, ['job', 'org', 'holder', 'generation', 'attempt', 'claimed', 'last renewal', 'time left', 'action'].map((h) => el('th', { text: h })))),
      el('tbody', {}, rows)));
}

// ---- jobs ----

function jobsQuery() {
  const q = new URLSearchParams(location.hash.split('?')[1] || '');
  return q;
}

async function renderJobs(view) {
  const q = jobsQuery();
  const data = await api('/api/jobs?' + q.toString());
  const field = (name, label, attrs) => el('label', {}, label,
    el('input', Object.assign({ name, value: q.get(name) || '' }, attrs || {})));
  const state = el('select', { name: 'state' }, el('option', { value: '', text: 'any' }),
    STATES.map((s) => el('option', { value: s, text: s, selected: q.get('state') === s })));
  const form = el('form', { class: 'filters', id: 'job-filters', onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of new FormData(e.target)) if (v) next.set(k, v);
    location.hash = '#/jobs?' + next.toString();
  } },
  field('org', 'organization', { inputmode: 'numeric', size: 6 }),
  field('queue', 'queue', { size: 12 }),
  el('label', {}, 'state', state),
  field('holder', 'holder'),
  field('before', 'enqueued before (ISO 8601)', { placeholder: '2026-01-01T00:00:00Z' }),
  el('button', { type: 'submit', text: 'Filter' }));
  const rows = data.jobs.map((j) => el('tr', { 'data-job': j.id },
    el('td', {}, jobLink(j.id)), el('td', { text: j.org_id }), el('td', { text: j.queue }),
    el('td', {}, stateBadge(j.state)), el('td', { text: j.generation }), el('td', { text: j.assignee || '—' }),
    el('td', { text: `${j.attempts}/${j.max_attempts}` }), el('td', { text: j.enqueued_at }),
    el('td', { text: j.completed_at || '—' })));
  const paging = el('div', { class: 'filters' });
  if (q.get('after')) {
    const first = new URLSearchParams(q); first.delete('after');
    paging.append(el('a', { href: '#/jobs?' + first.toString(), text: '« first page' }));
  }
  if (data.next_after !== null) {
    const next = new URLSearchParams(q); next.set('after', data.next_after);
    paging.append(el('a', { id: 'next-page', href: '#/jobs?' + next.toString(), text: 'next page »' }));
  }
  view.replaceChildren(el('h1', { text: 'Jobs' }), form,
    el('table', { id: 'jobs' },
      el('thead', {}, el('tr', {}, ['job', 'org', 'queue', 'state', 'generation', 'holder', 'attempt', 'enqueued', 'finished'].map((h) => el('th', { text: h })))),
      el('tbody', {}, rows)),
    paging);
}

// ---- one job ----

async function jobAction(id, action) {
  await act({
    key: id,
    path: `/api/jobs/${id}/${action}`,
    subject: `Job #${id}`,
    done: (r) => (action === 'cancel'
      ? `Job #${id} cancelled (it was ${r.was}${r.holder ? ', held by ' + r.holder + ', who was told' : ''}; ${r.by}).`
      : `Job #${id} is ${r.state} again with a fresh attempt budget (${r.by}).`),
  });
}

// Cancel while the job may still run; retry once it ended without a verdict.
function jobActions(j) {
  const box = el('div', { class: 'job-actions' }, actionResult());
  const can = CANCELLABLE.includes(j.state) ? 'cancel' : RETRYABLE.includes(j.state) ? 'retry' : null;
  if (!can) return box;
  box.append(el('input', { class: 'reason', placeholder: 'why (recorded)', value: reasons.get(j.id) || '',
                           oninput: (e) => reasons.set(j.id, e.target.value) }), ' ',
    el('button', { type: 'button', id: 'job-' + can, class: can === 'cancel' ? 'danger' : null,
                   onclick: () => jobAction(j.id, can), text: can === 'cancel' ? 'Cancel job' : 'Retry job' }));
  return box;
}

async function renderJob(view, id) {
  const data = await api('/api/jobs/' + encodeURIComponent(id));
  const j = data.job;
  const fields = el('dl', { class: 'fields' });
  const add = (k, v) => fields.append(el('dt', { text: k }), el('dd', {}, v === null || v === undefined ? '—' : v));
  add('state', stateBadge(j.state));
  add('organization', String(j.org_id));
  add('queue', j.queue);
  add('runs at', j.run_at);
  add('run deadline', j.deadline);
  add('dedupe key', j.dedupe_key);
  add('generation', String(j.generation));
  add('attempts', `${j.attempts}/${j.max_attempts}`);
  add('priority', j.base_priority === null || j.base_priority === undefined
    ? String(j.priority) : `${j.priority} (aged from ${j.base_priority})`);
  add('holder', j.assignee);
  add('enqueued', j.enqueued_at);
  add('claimed', j.claimed_at);
  add('lease expires', j.lease_expires_at);
  const p = data.progress;
  add('progress', p ? `${p.percent}%` + (p.note ? ` — ${p.note}` : '') +
    ` (generation ${p.generation}, checkpoint ${p.checkpoint_bytes} bytes, ${p.updated_at})` : null);
  const k = data.park;
  add('parked', k ? `by ${k.parked_by} at generation ${k.generation}, ${k.parked_at}, until ${k.deadline}` +
    (k.note ? ` — ${k.note}` : '') +
    (k.used_at ? `; finished ${k.outcome} by ${k.used_by} at ${k.used_at}` : '; waiting for its callback') : null);
  const x = data.exclusions;
  if (x) {
    const named = x.reviewers.concat(x.completers_of.map((c) => `whoever completed job ${c.job}` +
      (c.completer ? ` (${c.completer})` : c.state === 'completed' ? '' : ` (not ended yet: nobody until it does)`)));
    add('excluded reviewers', el('span', { id: 'excluded', text: named.join(', ') }));
    add('connected reviewers', x.connected.length || x.connected_unnamed
      ? x.connected.map((c) => c.name + (c.excluded ? ' (excluded)' : '')).join(', ') +
        (x.connected_unnamed ? ` and more not named (${x.connected_unnamed} coordinators)` : '')
      : null);
    if (x.waits_because) add('waits because', el('strong', { id: 'waits-because', text: x.waits_because }));
  }
  add('finished', j.completed_at);
  add('result', data.result ? `${data.result.result_ref} (generation ${data.result.generation}, published ${data.result.published_at})` : null);
  add('last error', j.last_error ? el('pre', { text: j.last_error }) : null);
  if (j.state === 'quarantined') {
    add('quarantined from', j.quarantined_from);
    add('quarantine reason', el('pre', { text: j.quarantine_reason }));
  }
  add('recovery class', data.class);
  if (data.findings) add('findings', el('pre', { text: data.findings }));
  add('payload', j.payload ? el('pre', { text: j.payload }) : null);
  const timeline = el('ol', { class: 'timeline', id: 'timeline' }, data.events.map((e) =>
    el('li', { class: e.kind, 'data-kind': e.kind },
      el('span', { class: 'kind', text: e.kind }), ' ',
      el('span', { class: 'muted', text: `#${e.id} · ${e.at} · generation ${e.generation}` + (e.worker ? ` · ${e.worker}` : '') }),
      e.detail ? el('pre', { text: e.detail }) : null)));
  view.replaceChildren(el('h1', { text: `Job #${j.id} ` },
    el('a', { href: '#/workflow/' + j.id, id: 'workflow-link', class: 'muted', text: 'workflow' })), jobActions(j), fields,
    el('h2', { text: `Audit timeline (${data.events.length} events)` }), timeline);
}

// ---- quarantine ----

async function resolveQuarantined(id, action) {
  await act({
    key: id,
    path: `/api/quarantine/${id}/${action}`,
    subject: `Job #${id}`,
    done: (r) => `Job #${id} is ${r.state} at generation ${r.generation} (${r.by}).`,
  });
}

async function renderQuarantine(view) {
  const data = await api('/api/quarantine');
  const result = actionResult();
  const rows = data.quarantined.map((j) => {
    const input = el('input', { class: 'reason', placeholder: 'why (recorded)', value: reasons.get(j.id) || '',
                                oninput: (e) => reasons.set(j.id, e.target.value) });
    return el('tr', { 'data-job': j.id },
      el('td', {}, jobLink(j.id)), el('td', { text: j.org_id }), el('td', { text: j.quarantined_from }),
      el('td', { text: j.generation }), el('td', {}, el('pre', { text: j.quarantine_reason })),
      el('td', { class: 'actions' }, input, ' ',
        el('button', { type: 'button', class: 'release', onclick: () => resolveQuarantined(j.id, 'release'), text: 'Release' }), ' ',
        el('button', { type: 'button', class: 'fail danger', onclick: () => resolveQuarantined(j.id, 'fail'), text: 'Fail' })));
  });
  view.replaceChildren(el('h1', { text: `Quarantine inbox (${data.quarantined.length})` }), result,
    data.quarantined.length === 0 ? el('p', { class: 'muted', text: 'Nothing is quarantined.' })
      : el('table', { id: 'quarantine' },
        el('thead', {}, el('tr', {}, ['job', 'org', 'from', 'generation', 'evidence', 'action'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows)));
}

// ---- drills ----

async function runCheck() {
  const out = document.getElementById('check-result');
  out.textContent = 'checking…';
  try {
    await api('/api/check', {});
  } catch (e) {
    out.textContent = e.message;
    out.className = 'error';
    return;
  }
  await render(false);
}

async function renderDrills(view) {
  const data = await api('/api/drills');
  const c = data.last_check;
  const check = el('div', { class: 'card', id: 'last-check' }, el('h2', { text: 'Last check' }),
    c ? el('div', {},
      el('p', { class: c.ok ? 'ok' : 'error', id: 'check-result',
                text: c.scoped ? `${c.ok ? 'OK' : c.violations.length + ' violations'} in your organizations — ${c.at} by ${c.by}`
                  : `${c.ok ? 'OK' : c.violations.length + ' violations'}: ${c.jobs} jobs, ${c.events} events, ${c.accepted_completions} accepted completions, ${c.rejections} rejections, ${c.reclaims} reclaims — ${c.at} by ${c.by}` }),
      c.violations.length ? el('pre', { text: c.violations.map((v) => `${v.invariant} job ${v.job_id}: ${v.evidence}`).join('\n') }) : null)
      : el('p', { class: 'muted', id: 'check-result', text: 'Not run since the console started.' }),
    el('button', { type: 'button', id: 'run-check', onclick: runCheck, text: 'Run check now' }));
  const reports = el('div', { class: 'cards reports' }, data.reports.map((r) =>
    el('div', { class: 'card', 'data-report': r.path }, el('h2', { text: r.path }),
      r.kind === 'svg' ? el('img', { src: '/reports/' + r.path, alt: r.path })
        : el('p', {}, el('a', { href: '/reports/' + r.path, target: '_blank', rel: 'noopener', text: `open JSON (${r.bytes} bytes)` })))));
  view.replaceChildren(el('h1', { text: 'Drills' }), check, el('h2', { text: `Reports (${data.reports.length})` }),
    data.reports.length ? reports : el('p', { class: 'muted', text: 'No reports: start the console with --reports DIR.' }));
}

// ---- shell ----

function route() {
  const path = (location.hash.replace(/^#/, '') || '/overview').split('?')[0];
  const parts = path.split('/').filter(Boolean);
  return { page: parts[0] || 'overview', arg: parts[1] };
}

const PAGES = {
  overview: { render: renderOverview, live: true },
  leases: { render: renderLeases, live: true },
  jobs: { render: renderJobs, live: false },
  job: { render: (v, id) => renderJob(v, id), live: true },
  workflow: { render: (v, id) => renderWorkflow(v, id), live: true },
  quarantine: { render: renderQuarantine, live: true },
  drills: { render: renderDrills, live: false },
};

async function render(fromNavigation) {
  const { page, arg } = route();
  const p = PAGES[page] || PAGES.overview;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.page === page || ((page === 'job' || page === 'workflow') && a.dataset.page === 'jobs'));
  }
  // A live refresh never replaces the page under an operator who is typing in it.
  const active = document.activeElement;
  if (!fromNavigation && active && (active.tagName === 'INPUT' || active.tagName === 'SELECT')) return;
  const view = document.getElementById('view');
  // An action's message belongs to the page it was taken on.
  if (fromNavigation) document.getElementById('action-result')?.remove();
  try {
    await p.render(view, arg);
    renders += 1;
    document.body.dataset.page = page;
    document.body.dataset.renders = String(renders);
    setStatus('updated ' + new Date().toLocaleTimeString('en-GB') + (p.live ? ' · live' : ''));
  } catch (e) {
    if (e.status === 401) { showLogin(); return; }
    document.body.dataset.page = page;
    document.body.dataset.error = e.message;
    view.replaceChildren(el('p', { class: 'error', text: e.message }));
    setStatus('error: ' + e.message, true);
  }
}

function schedule() {
  clearInterval(refreshTimer);
  const p = PAGES[route().page] || PAGES.overview;
  if (p.live) refreshTimer = setInterval(() => render(false), REFRESH_MS);
}

function showLogin() {
  clearInterval(refreshTimer);
  csrf = null;
  document.getElementById('login').hidden = false;
  document.getElementById('view').hidden = true;
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('who').textContent = '';
  document.body.dataset.page = 'login';
}

async function start() {
  try {
    const s = await api('/api/session');
    ({ all: STATES, queue: QUEUE_STATES, cancellable: CANCELLABLE, retryable: RETRYABLE } = s.states);
    if (!s.operator) { showLogin(); return; }
    csrf = s.csrf;
    document.getElementById('who').textContent = s.operator + (s.orgs ? ` · organizations ${s.orgs.join(', ')}` : ' · all organizations');
  } catch (e) {
    if (e.status === 401) { showLogin(); return; }
    setStatus(e.message, true);
    return;
  }
  document.getElementById('login').hidden = true;
  document.getElementById('view').hidden = false;
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = false;
  await render(true);
  schedule();
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const err = document.getElementById('login-error');
    err.textContent = '';
    try {
      await api('/api/login', { name: document.getElementById('login-name').value,
                                password: document.getElementById('login-password').value });
      await start();
    } catch (ex) {
      err.textContent = ex.message;
    }
  });
  document.getElementById('logout').addEventListener('click', async () => {
    await api('/api/logout', {}).catch(() => {});
    showLogin();
  });
  window.addEventListener('hashchange', async () => { await render(true); schedule(); });
  start();
});
