// The console's workflow page: a workflow's jobs as a table and as a graph. Loaded before
// app.js, whose helpers (el, svg, api, stateBadge, jobLink) it calls when a page is drawn; like
// app.js, it builds everything with DOM calls and textContent.
'use strict';

// ---- workflow ----

// Each job's stage: 1 for a job that waits for nothing shown, else one more than the latest
// stage among its dependencies (a fan-out's branches share a stage, its fan-in comes after).
function stagesOf(data) {
  const deps = new Map(data.stages.map((s) => [s.id, []]));
  for (const e of data.edges) deps.get(e.job)?.push(e.depends_on);
  const level = new Map();
  const visit = (id, seen) => {
    if (level.has(id)) return level.get(id);
    if (seen.has(id)) return 1;
    seen.add(id);
    const l = 1 + Math.max(0, ...(deps.get(id) || []).map((d) => visit(d, seen)));
    level.set(id, l);
    return l;
  };
  for (const s of data.stages) visit(s.id, new Set());
  return level;
}

// A node's fill per job state: the graph's legend says the same.
const STATE_FILLS = {
  pending: '#eaeef2', scheduled: '#e4dbff', assigned: '#b6e3ff', completed: '#aceebb',
  failed: '#ffcecb', discarded: '#ff8182', cancelled: '#d0d7de', quarantined: '#ffd8a8',
  parked: '#c8e1ff', waiting: '#fff8c5',
};

// The workflow as a graph: one column per stage, one box per job coloured by its state, one arrow
// per dependency from the job depended on to the job that waits for it. Drawn here, as SVG.
function workflowGraph(data, level) {
  const boxW = 170, boxH = 40, colW = 230, rowH = 58, pad = 16;
  const columns = new Map();
  for (const s of [...data.stages].sort((a, b) => a.id - b.id)) {
    const l = level.get(s.id);
    if (!columns.has(l)) columns.set(l, []);
    columns.get(l).push(s);
  }
  const deepest = Math.max(1, ...[...columns.values()].map((c) => c.length));
  const width = 2 * pad + (columns.size - 1) * colW + boxW;
  const height = 2 * pad + (deepest - 1) * rowH + boxH + 24;
  const root = svg('svg', { id: 'workflow-graph', class: 'workflow-graph', width, height,
                            viewBox: `0 0 ${width} ${height}`, role: 'img',
                            'aria-label': 'the workflow: stages as columns, dependencies as arrows' });
  const defs = svg('defs');
  const marker = svg('marker', { id: 'wf-arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
                                 markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#57606a' }));
  defs.append(marker);
  root.append(defs);
  const at = new Map();
  [...columns.keys()].sort((a, b) => a - b).forEach((l, c) => {
    columns.get(l).forEach((s, r) => at.set(s.id, { x: pad + c * colW, y: pad + r * rowH }));
  });
  for (const e of data.edges) {
    const from = at.get(e.depends_on), to = at.get(e.job);
    if (!from || !to) continue;
    const x1 = from.x + boxW, y1 = from.y + boxH / 2, x2 = to.x, y2 = to.y + boxH / 2;
    const mid = (x1 + x2) / 2;
    const edge = svg('path', { class: 'edge', 'data-from': e.depends_on, 'data-to': e.job,
                               d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`,
                               fill: 'none', stroke: '#57606a', 'stroke-width': 1.5,
                               'marker-end': 'url(#wf-arrow)' });
    edge.append(svg('title', { text: `#${e.job} depends on #${e.depends_on} (${e.policy}${e.resolved ? ': ' + e.resolved : ''})` }));
    root.append(edge);
  }
  for (const s of data.stages) {
    const p = at.get(s.id);
    const node = svg('g', { class: 'node' + (s.id === data.job ? ' asked' : ''), 'data-job': s.id,
                            'data-state': s.state, transform: `translate(${p.x} ${p.y})` });
    const link = svg('a', { href: '#/job/' + s.id });
    link.append(svg('rect', { width: boxW, height: boxH, rx: 5, fill: STATE_FILLS[s.state] || '#ffffff',
                              stroke: s.id === data.job ? '#1d4e89' : '#8c959f',
                              'stroke-width': s.id === data.job ? 2.5 : 1 }));
    link.append(svg('text', { x: 8, y: 16, class: 'id', text: `#${s.id} ${s.queue || ''}` }));
    link.append(svg('text', { x: 8, y: 32, class: 'label', text: s.state + (s.reviewer ? ' · ' + s.reviewer : '') }));
    link.append(svg('title', { text: `#${s.id}: ${s.state}` }));
    node.append(link);
    root.append(node);
  }
  const shown = [...new Set(data.stages.map((s) => s.state))].sort();
  shown.forEach((state, i) => {
    const x = pad + i * 110, y = height - 14;
    root.append(svg('rect', { class: 'legend', x, y: y - 10, width: 12, height: 12,
                              fill: STATE_FILLS[state] || '#ffffff', stroke: '#8c959f' }));
    root.append(svg('text', { x: x + 16, y, text: state }));
  });
  return root;
}

async function renderWorkflow(view, id) {
  const data = await api('/api/jobs/' + encodeURIComponent(id) + '/workflow');
  const level = stagesOf(data);
  const dependsOn = new Map();
  for (const e of data.edges) {
    if (!dependsOn.has(e.job)) dependsOn.set(e.job, []);
    dependsOn.get(e.job).push(e);
  }
  const rows = [...data.stages].sort((a, b) => level.get(a.id) - level.get(b.id) || a.id - b.id);
  const body = rows.map((s) => el('tr', { 'data-job': s.id, 'data-state': s.state, class: s.id === data.job ? 'asked' : null },
    el('td', { class: 'n', text: String(level.get(s.id)) }),
    el('td', {}, jobLink(s.id)),
    el('td', { text: s.queue || '—' }),
    el('td', {}, stateBadge(s.state)),
    el('td', { class: 'reviewer', text: s.reviewer || '—' }),
    el('td', { class: 'waits' }, s.waits_for.length ? s.waits_for.map((d, i) => [i ? ', ' : '', jobLink(d)]).flat() : '—'),
    el('td', { class: 'depends' }, (dependsOn.get(s.id) || []).map((e, i) => [i ? ', ' : '', jobLink(e.depends_on),
      el('span', { class: 'muted', text: ` (${e.policy}${e.resolved ? ': ' + e.resolved : ''})` })]).flat()),
    el('td', {}, s.last_error ? el('pre', { text: s.last_error }) : '')));
  const waiting = data.stages.filter((s) => s.state === 'waiting').length;
  view.replaceChildren(
    el('h1', { text: `Workflow of job #${data.job}` }),
    el('div', { class: 'facts' },
      el('span', {}, 'organization ', el('b', { text: String(data.org_id) })),
      el('span', {}, el('b', { id: 'workflow-jobs', text: String(data.stages.length) }), ' jobs'),
      el('span', {}, el('b', { text: String(data.edges.length) }), ' dependencies'),
      el('span', {}, el('b', { text: String(waiting) }), ' waiting'),
      data.truncated ? el('span', { class: 'error', text: `cut short at ${data.stages.length} jobs: more are connected` }) : null),
    data.edges.length === 0
      ? el('p', { class: 'muted', text: 'This job has no dependencies and nothing depends on it.' })
      : el('div', { class: 'workflow-views' },
        el('table', { class: 'workflow', id: 'workflow' },
          el('thead', {}, el('tr', {}, ['stage', 'job', 'queue', 'state', 'reviewer', 'waits for', 'depends on (policy: how it ended)', 'last error'].map((h) => el('th', { text: h })))),
          el('tbody', {}, body)),
        el('div', { class: 'graph' }, workflowGraph(data, level))));
}
