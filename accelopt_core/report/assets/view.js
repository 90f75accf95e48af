/* AccelOpt: the picture of one beam search (issue 32).
 *
 * Draws a search view (accelopt_core/report/model.py, "schema" 1) into <main id="app">: the
 * beam as a tree (x = iteration, an edge from each parent to its child, colour = verdict,
 * size = speedup), the best speedup per iteration, the roofline (GPU timing only), the
 * candidate table, the selected candidate's plan, reason, diff, derived inputs and device
 * facts, the failures by stage and the experiences the memory gained.
 *
 * The view comes from <script type="application/json" id="accelopt-view"> (the HTML report) or,
 * in the VS Code webview, from messages: {type: "view", view} replaces it, {type: "delta",
 * delta} merges changed nodes by id. Every text of the view is written as text (textContent),
 * never parsed as HTML; Plotly's hover labels get it with < > & escaped.
 */
(function () {
  'use strict';

  const VERDICTS = {
    baseline: ['baseline', '#6e7781'],
    ranked: ['ranked: verified faster', '#1a7f37'],
    pending: ['correct, being re-timed', '#6a9f1a'],
    slower: ['correct, not ranked', '#0969da'],
    incorrect: ['incorrect', '#bc4c00'],
    failed: ['failed', '#cf222e'],
  };
  const vscode = typeof acquireVsCodeApi === 'function' ? acquireVsCodeApi() : null;
  let view = null;
  let selected = null;

  // -- small helpers ---------------------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'text') node.textContent = String(value);
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return node;
  }
  const esc = (s) => String(s ?? '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const first = (s) => String(s || '').trim().split('\n')[0] || '';
  const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);
  const fx = (x) => (typeof x === 'number' ? `${x.toFixed(2)}x` : '—');
  const ms = (x) => (typeof x === 'number' ? (x >= 100 ? x.toFixed(0) : x.toPrecision(3)) : '—');
  const num = (x, unit) => (typeof x === 'number' ? `${x.toPrecision(3)}${unit || ''}` : '—');
  const label = (n) => (n.verdict === 'baseline' ? 'baseline' : n.plan || '(no plan)');
  const badge = (v) => el('span', { class: `badge v-${v}`, text: (VERDICTS[v] || [v])[0] });
  const cssVar = (name, fallback) =>
    getComputedStyle(document.body).getPropertyValue(name).trim() || fallback;

  function chartLayout(extra) {
    const fg = cssVar('--fg', '#1f2328');
    const grid = cssVar('--border', '#d1d9e0');
    const axis = { gridcolor: grid, zerolinecolor: grid, linecolor: grid, color: fg };
    return Object.assign(
      {
        paper_bgcolor: 'rgba(0,0,0,0)',
        plot_bgcolor: 'rgba(0,0,0,0)',
        font: { color: fg, size: 12 },
        margin: { l: 56, r: 16, t: 8, b: 44 },
        hovermode: 'closest',
        xaxis: Object.assign({}, axis),
        yaxis: Object.assign({}, axis),
      },
      extra || {},
      { xaxis: Object.assign({}, axis, (extra || {}).xaxis), yaxis: Object.assign({}, axis, (extra || {}).yaxis) },
    );
  }
  const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ['lasso2d', 'select2d'] };

  // -- the tree's layout: x = iteration, y = leaf order (a parent midway between its children) --

  function treeLayout(nodes) {
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const kids = new Map();
    const roots = [];
    for (const n of nodes) {
      if (n.parent && n.parent !== n.id && byId.has(n.parent)) {
        if (!kids.has(n.parent)) kids.set(n.parent, []);
        kids.get(n.parent).push(n);
      } else {
        roots.push(n);
      }
    }
    const order = (a, b) => a.iteration - b.iteration || (b.speedup || 0) - (a.speedup || 0);
    const y = new Map();
    let next = 0;
    const visit = (n, path) => {
      if (y.has(n.id) || path.has(n.id)) return y.get(n.id) ?? next;
      path.add(n.id);
      const children = (kids.get(n.id) || []).slice().sort(order).filter((c) => !path.has(c.id));
      let at;
      if (!children.length) at = next++;
      else {
        const ys = children.map((c) => visit(c, path));
        at = (Math.min(...ys) + Math.max(...ys)) / 2;
      }
      y.set(n.id, at);
      path.delete(n.id);
      return at;
    };
    roots.sort(order).forEach((r) => visit(r, new Set()));
    for (const n of nodes) if (!y.has(n.id)) visit(n, new Set()); // in a cycle: placed alone
    return { y, rows: Math.max(next, 1) };
  }

  function markerSize(n) {
    if (typeof n.speedup !== 'number' || n.speedup <= 0) return 8;
    return Math.max(8, Math.min(40, 14 * Math.sqrt(n.speedup)));
  }

  function hover(n) {
    const parts = [`<b>${esc(short(label(n), 80))}</b>`, esc((VERDICTS[n.verdict] || [n.verdict])[0])];
    if (typeof n.speedup === 'number') parts.push(`speedup ${fx(n.speedup)} · ${ms(n.latency_ms)} ms`);
    if (n.stage) parts.push(esc(short(`${n.stage}: ${first(n.reason)}`, 100)));
    parts.push(`iteration ${n.iteration} · ${esc(n.id)}`);
    return parts.join('<br>');
  }

  function drawTree(box) {
    const nodes = view.nodes || [];
    const { y, rows } = treeLayout(nodes);
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const ex = [];
    const ey = [];
    for (const n of nodes) {
      const p = byId.get(n.parent);
      if (!p) continue;
      ex.push(p.iteration, n.iteration, null);
      ey.push(y.get(p.id), y.get(n.id), null);
    }
    const traces = [
      { x: ex, y: ey, mode: 'lines', line: { color: cssVar('--border', '#c8d1da'), width: 1.2 }, hoverinfo: 'skip', showlegend: false },
    ];
    for (const [verdict, [name, color]] of Object.entries(VERDICTS)) {
      const group = nodes.filter((n) => n.verdict === verdict);
      if (!group.length) continue;
      traces.push({
        x: group.map((n) => n.iteration),
        y: group.map((n) => y.get(n.id)),
        customdata: group.map((n) => n.id),
        text: group.map(hover),
        hovertemplate: '%{text}<extra></extra>',
        mode: verdict === 'ranked' ? 'markers+text' : 'markers',
        textposition: 'middle right',
        texttemplate: group.map((n) => (n.rank ? ` #${n.rank}` : '')),
        type: 'scatter',
        name,
        marker: { color, size: group.map(markerSize), line: { color: '#fff', width: 1 } },
      });
    }
    const sel = byId.get(selected);
    if (sel) {
      traces.push({
        x: [sel.iteration], y: [y.get(sel.id)], mode: 'markers', hoverinfo: 'skip', showlegend: false,
        marker: { size: markerSize(sel) + 10, color: 'rgba(0,0,0,0)', line: { color: cssVar('--fg', '#1f2328'), width: 2 } },
      });
    }
    const last = Math.max(1, ...nodes.map((n) => n.iteration), view.meta.iterations || 0);
    const height = Math.max(260, Math.min(1400, 60 + rows * 18));
    box.style.height = `${height}px`;
    box.dataset.nodes = String(nodes.length);
    Plotly.react(
      box,
      traces,
      chartLayout({
        height,
        legend: { orientation: 'h', x: 0, y: 1, yanchor: 'bottom' },
        margin: { l: 24, r: 16, t: 28, b: 44 },
        xaxis: { title: { text: 'iteration' }, dtick: 1, range: [-0.4, last + 0.4], zeroline: false },
        yaxis: { visible: false, autorange: 'reversed' },
      }),
      CONFIG,
    );
    if (!box.dataset.clickBound) {
      box.on('plotly_click', (ev) => {
        const id = ev && ev.points && ev.points[0] && ev.points[0].customdata;
        if (id) select(id);
      });
      box.dataset.clickBound = '1';
    }
  }

  function drawBest(box) {
    const best = view.best || [];
    if (!best.length) {
      box.replaceChildren(el('div', { class: 'chart-note', text: 'No speedup to draw: the baseline was not timed.' }));
      return;
    }
    const byId = new Map((view.nodes || []).map((n) => [n.id, n]));
    Plotly.react(
      box,
      [
        {
          x: best.map((b) => b.iteration),
          y: best.map((b) => b.speedup),
          text: best.map((b) => esc(short(label(byId.get(b.id) || { plan: b.id }), 80))),
          hovertemplate: 'iteration %{x}: best %{y:.2f}x<br>%{text}<extra></extra>',
          mode: 'lines+markers',
          line: { shape: 'hv', color: '#1a7f37', width: 2 },
          marker: { size: 8, color: '#1a7f37' },
          name: 'best speedup',
        },
      ],
      chartLayout({
        height: 280,
        showlegend: false,
        xaxis: { title: { text: 'iteration' }, dtick: 1 },
        yaxis: { title: { text: 'best verified speedup (×)' }, rangemode: 'tozero' },
      }),
      CONFIG,
    );
  }

  function rooflineNote() {
    const timing = view.meta.timing;
    if (timing === 'interpreter' || timing === 'simulated') {
      return `No roofline: latencies were measured ${timing === 'interpreter' ? 'under the Triton interpreter' : 'by the NKI simulator'} on the CPU, which says nothing about the device's bandwidth or compute.`;
    }
    if (timing === 'cuda' || timing === 'neuron') {
      return "No roofline: no candidate has achieved GB/s or TFLOP/s (the harness's BENCH gives no 'bytes' or 'flops').";
    }
    return 'No roofline: the baseline was not timed on a device.';
  }

  function drawRoofline(box) {
    const roof = view.roofline;
    if (!roof || !(roof.points || []).length) {
      box.replaceChildren(el('div', { class: 'chart-note', text: rooflineNote() }));
      return;
    }
    const byId = new Map((view.nodes || []).map((n) => [n.id, n]));
    const peak = roof.peak;
    const pts = roof.points;
    const text = (p) => `${esc(short(label(byId.get(p.id) || { plan: p.id }), 70))}<br>${num(p.gbps, ' GB/s')} · ${num(p.tflops, ' TFLOP/s')}${typeof p.pct_of_peak === 'number' ? ` · ${p.pct_of_peak.toFixed(0)}% of ${p.bound || ''} peak` : ''}`;
    const traces = [];
    const withIntensity = pts.filter((p) => typeof p.intensity === 'number' && p.intensity > 0 && p.tflops > 0);
    let layout;
    if (withIntensity.length) {
      const xs = withIntensity.map((p) => p.intensity);
      let lo = Math.min(...xs) / 4;
      let hi = Math.max(...xs) * 4;
      if (peak) {
        const ridge = (peak.bf16_tflops * 1000) / peak.hbm_gbps;
        lo = Math.min(lo, ridge / 100);
        hi = Math.max(hi, ridge * 4);
        const roofAt = (x, tf) => Math.min(tf, (x * peak.hbm_gbps) / 1000);
        const span = [lo, peak.fp32_tflops ? (peak.fp32_tflops * 1000) / peak.hbm_gbps : ridge, ridge, hi];
        for (const [tf, name, dash] of [[peak.fp32_tflops, 'FP32 roof', 'dot'], [peak.bf16_tflops, 'BF16/FP16 tensor roof', 'dash']]) {
          if (!tf) continue;
          const x = span.filter((v) => v > 0).sort((a, b) => a - b);
          traces.push({ x, y: x.map((v) => roofAt(v, tf)), mode: 'lines', name: `${name} (${tf} TFLOP/s, ${peak.hbm_gbps} GB/s)`, line: { dash, color: '#6e7781' }, hoverinfo: 'name' });
        }
      }
      for (const [verdict, [name, color]] of Object.entries(VERDICTS)) {
        const group = withIntensity.filter((p) => p.verdict === verdict);
        if (!group.length) continue;
        traces.push({ x: group.map((p) => p.intensity), y: group.map((p) => p.tflops), customdata: group.map((p) => p.id), text: group.map(text), hovertemplate: '%{text}<extra></extra>', mode: 'markers', name, marker: { size: 10, color } });
      }
      layout = { xaxis: { type: 'log', dtick: 1, title: { text: 'arithmetic intensity (FLOP/B)' }, range: [Math.log10(lo), Math.log10(hi)] }, yaxis: { type: 'log', dtick: 1, title: { text: 'achieved TFLOP/s' } } };
    } else {
      for (const [verdict, [name, color]] of Object.entries(VERDICTS)) {
        const group = pts.filter((p) => p.verdict === verdict && typeof p.gbps === 'number');
        if (!group.length) continue;
        traces.push({ x: group.map((p) => short(label(byId.get(p.id) || { plan: p.id }), 24) + ` ·${p.id.slice(0, 4)}`), y: group.map((p) => p.gbps), customdata: group.map((p) => p.id), text: group.map(text), hovertemplate: '%{text}<extra></extra>', type: 'bar', name, marker: { color } });
      }
      const shapes = peak ? [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: peak.hbm_gbps, y1: peak.hbm_gbps, line: { dash: 'dash', color: '#6e7781' } }] : [];
      layout = { shapes, xaxis: { type: 'category' }, yaxis: { title: { text: `achieved GB/s${peak ? ` (HBM peak ${peak.hbm_gbps} GB/s)` : ''}` } } };
    }
    Plotly.react(box, traces, chartLayout(Object.assign({ height: 340, legend: { orientation: 'h', x: 0, y: 1, yanchor: 'bottom' }, margin: { l: 56, r: 16, t: 8, b: 44 } }, layout)), CONFIG);
    if (!box.dataset.clickBound) {
      box.on('plotly_click', (ev) => {
        const id = ev && ev.points && ev.points[0] && ev.points[0].customdata;
        if (id) select(id);
      });
      box.dataset.clickBound = '1';
    }
  }

  // -- the page ------------------------------------------------------------------------------------

  function ordered(nodes) {
    const weight = { baseline: 0, ranked: 1, pending: 2, slower: 3, incorrect: 4, failed: 5 };
    return nodes
      .map((n, i) => [n, i])
      .sort(([a, i], [b, j]) => {
        if (a.verdict === 'baseline' || b.verdict === 'baseline') return (weight[a.verdict] || 0) - (weight[b.verdict] || 0);
        if (a.verdict === 'ranked' && b.verdict === 'ranked') return (a.rank || 99) - (b.rank || 99) || (b.speedup || 0) - (a.speedup || 0);
        if (a.verdict === 'ranked' || b.verdict === 'ranked') return a.verdict === 'ranked' ? -1 : 1;
        return a.iteration - b.iteration || i - j;
      })
      .map(([n]) => n);
  }

  function header() {
    const m = view.meta;
    const running = view.state === 'running';
    const title = el('h1', {}, el('code', { text: m.kernel || 'kernel' }), ` in ${m.file || '?'}`,
      el('span', { class: `state ${view.state}`, text: running ? 'running' : (m.stopped_reason || view.state) }));
    const sub = el('p', { class: 'sub' },
      el('span', { text: `target ${m.target || '?'}` }),
      el('span', { text: `timing ${m.timing || 'none'}` }),
      m.device ? el('span', { text: m.device }) : null,
      el('span', { text: `proposer ${m.proposer || '?'}` }),
      el('span', { text: `iterations ${m.iterations_run}${m.iterations ? `/${m.iterations}` : ''}` }),
      el('span', { text: `${m.evaluated} evaluations` }),
      typeof m.wall_s === 'number' ? el('span', { text: `${m.wall_s.toFixed(1)} s` }) : null,
      m.tokens ? el('span', { text: `${m.tokens} tokens${m.cost_usd ? ` · $${m.cost_usd.toFixed(4)}` : ''}` }) : null,
      m.run_id ? el('span', { text: `run ${m.run_id}` }) : null);
    const notes = [];
    if (m.baseline_status) notes.push(el('div', { class: 'note error', text: `The baseline is not usable: ${m.baseline_status}` }));
    if (m.timing_note) notes.push(el('div', { class: 'note', text: `Note: ${m.timing_note}.` }));
    for (const w of m.warnings || []) notes.push(el('div', { class: 'note', text: w }));
    const nodes = view.nodes || [];
    const count = (v) => nodes.filter((n) => n.verdict === v).length;
    const card = (k, v) => el('div', { class: 'card' }, el('div', { class: 'k', text: k }), el('div', { class: 'v', text: v }));
    const cards = el('div', { class: 'cards' },
      card('baseline latency', m.baseline_ms != null ? `${ms(m.baseline_ms)} ms` : '—'),
      card('best verified speedup', m.best_speedup ? fx(m.best_speedup) : 'none'),
      card('ranked / candidates', `${count('ranked')} / ${nodes.length - 1 > 0 ? nodes.length - 1 : 0}`),
      card('failed', String(count('failed') + count('incorrect'))),
      card('memory', `${(view.experiences || []).length || m.memory_added || 0} experience(s)`));
    return [title, sub, ...notes, cards];
  }

  function table() {
    const rows = ordered(view.nodes || []).map((n) =>
      el('tr', { class: n.id === selected ? 'selected' : '', 'data-id': n.id, onclick: () => select(n.id) },
        el('td', { class: 'num', text: n.rank || '' }),
        el('td', { class: 'mono', text: n.id.slice(0, 12) }),
        el('td', { class: 'num', text: n.iteration }),
        el('td', { text: short(label(n), 70) }),
        el('td', {}, badge(n.verdict)),
        el('td', { class: 'num', text: fx(n.speedup) }),
        el('td', { class: 'num', text: ms(n.latency_ms) }),
        el('td', { class: 'why', title: n.reason || '', text: n.stage ? `${n.stage}: ${first(n.reason)}` : n.note || first(n.reason) })));
    return el('div', { class: 'table-wrap' }, el('table', { id: 'candidates' },
      el('thead', {}, el('tr', {}, ['rank', 'id', 'iter.', 'plan', 'verdict', 'speedup', 'ms', 'why'].map((h, i) => el('th', { class: i === 0 || i === 2 || i === 5 || i === 6 ? 'num' : '', text: h })))),
      el('tbody', {}, rows)));
  }

  function diffBlock(text) {
    const pre = el('pre', { class: 'diff' });
    for (const line of String(text).split('\n')) {
      const cls = line.startsWith('@@') ? 'hunk' : line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : 'line';
      pre.append(el('span', { class: cls, text: line || ' ' }));
    }
    return pre;
  }

  function details() {
    const n = (view.nodes || []).find((x) => x.id === selected);
    const box = el('div', { id: 'details' });
    if (!n) {
      box.append(el('p', { class: 'muted', text: 'Select a candidate in the tree or the table.' }));
      return box;
    }
    box.dataset.id = n.id;
    box.append(el('h3', {}, `${label(n)} `, badge(n.verdict)));
    const kv = (k, v) => (v === null || v === undefined || v === '' ? null : el('div', {}, el('span', { text: `${k}: ` }), el('span', { class: 'mono', text: v })));
    box.append(el('div', { class: 'kv' },
      kv('id', n.id), kv('parent', n.parent), kv('iteration', n.iteration), kv('rank', n.rank),
      kv('speedup', n.speedup != null ? fx(n.speedup) : null),
      kv('latency', n.latency_ms != null ? `${ms(n.latency_ms)} ms${n.p20_ms != null ? ` (p20 ${ms(n.p20_ms)}, p80 ${ms(n.p80_ms)})` : ''}` : null),
      kv('% of peak', n.pct_of_peak != null ? `${n.pct_of_peak.toFixed(1)}% (${n.bound || '?'} bound)` : null),
      kv('achieved', n.gbps != null || n.tflops != null ? `${num(n.gbps, ' GB/s')} · ${num(n.tflops, ' TFLOP/s')}` : null),
      kv('status', n.status), kv('stage', n.stage), kv('line', n.line), kv('rule', n.rule),
      kv('made by', n.fixed ? 'the fixer' : null), kv('failed at', n.retime ? 'its re-timing' : null),
      kv('transcript call', n.call)));
    if (n.plan_text) box.append(el('h4', { text: 'plan' }), el('pre', { class: 'wrap', text: n.plan_text }));
    if (n.note) box.append(el('p', { text: n.note }));
    if (n.reason) box.append(el('h4', { text: n.stage ? `why it failed (${n.stage})` : 'verdict' }), el('pre', { class: 'wrap', text: n.reason }));
    if (n.excerpt) box.append(el('pre', { text: n.excerpt }));
    if (n.diff) box.append(el('h4', { text: 'diff against the original file' }), diffBlock(n.diff));
    else if (n.verdict !== 'baseline') box.append(el('h4', { text: 'diff' }), el('p', { class: 'muted', text: 'No code: the reply held none.' }));
    const d = n.derived;
    if (d) {
      box.append(el('h4', { text: 'derived inputs checked' }));
      if (d.summary) box.append(el('p', { text: d.summary }));
      const items = (d.checked || []).map(([name, inputs]) => el('li', { text: `checked: ${name}${inputs ? ` (${inputs})` : ''}` }))
        .concat((d.skipped || []).map(([name, why]) => el('li', { class: 'muted', text: `skipped: ${name}: ${why}` })))
        .concat((d.deferred_groups || []).map(([names, why]) => el('li', { class: 'muted' }, `left to the search (${why}):`, el('ul', {}, names.map((name) => el('li', { text: name }))))));
      if (items.length) box.append(el('ul', {}, items));
      const s = d.search;
      if (s && d.search_line) {
        box.append(el('h4', { text: 'property-based search' }), el('p', { text: d.search_line }));
        if (s.counterexample) box.append(el('pre', { class: 'wrap', text: `counterexample: ${s.counterexample}` }));
        if ((s.examples || []).length) box.append(el('p', { class: 'muted', text: `examples tried: ${s.examples.join(' · ')}` }));
      }
    }
    if ((n.gpu || []).length) box.append(el('h4', { text: 'device facts' }), el('pre', { class: 'wrap', text: n.gpu.join('\n') }));
    if ((n.warnings || []).length) box.append(el('h4', { text: 'warnings' }), el('ul', {}, n.warnings.map((w) => el('li', { text: w }))));
    if (vscode && n.verdict === 'ranked' && n.rank && view.state !== 'running') {
      box.append(el('div', { class: 'actions' },
        el('button', { class: 'secondary', onclick: () => vscode.postMessage({ type: 'preview', candidateId: n.id }), text: 'Preview' }),
        el('button', { onclick: () => vscode.postMessage({ type: 'apply', candidateId: n.id }), text: 'Apply' }),
        el('span', { class: 'muted', text: 'the same edit as its code action' })));
    }
    return box;
  }

  function failures() {
    const f = view.meta.failures || {};
    const entries = Object.entries(f);
    if (!entries.length) return el('p', { class: 'muted', text: 'No sample failed.' });
    return el('div', { class: 'chips' }, entries.map(([stage, n]) => el('span', { text: `${stage} ${n}` })));
  }

  function experiences() {
    const list = view.experiences || [];
    if (!list.length) {
      const text = view.state === 'running' ? 'The memory is written when the search ends.' : 'The search added no experience to the optimization memory.';
      return el('p', { class: 'muted', text });
    }
    return el('ul', { class: 'exp' }, list.map((e) =>
      el('li', {},
        el('span', { class: `badge ${e.positive ? 'v-ranked' : e.hack ? 'v-failed' : 'v-slower'}`, text: e.positive ? 'positive' : e.hack ? 'reward hack' : 'negative' }),
        ` ${e.title} `, el('span', { class: 'muted', text: `${typeof e.speedup === 'number' ? fx(e.speedup) : ''} · ${e.id}` }),
        e.rule ? el('div', { class: 'rule', text: e.rule }) : null,
        e.reason ? el('div', { class: 'rule', text: `why: ${e.reason}` }) : null)));
  }

  function render() {
    const app = document.getElementById('app');
    if (!view) {
      app.replaceChildren(el('p', { class: 'muted', text: 'Waiting for the search…' }));
      return;
    }
    const nodes = view.nodes || [];
    if (!selected || !nodes.some((n) => n.id === selected)) {
      const top = nodes.find((n) => n.verdict === 'ranked' && n.rank === 1) || nodes.find((n) => n.verdict === 'ranked') || nodes[0];
      selected = top ? top.id : null;
    }
    const charts = typeof Plotly !== 'undefined';
    const tree = el('div', { id: 'tree', class: 'chart' });
    const best = el('div', { id: 'best', class: 'chart' });
    const roof = el('div', { id: 'roofline', class: 'chart' });
    const m = view.meta;
    const kept = document.querySelector('.table-wrap');
    const scroll = kept ? kept.scrollTop : 0;
    app.replaceChildren(
      ...header(),
      el('h2', { text: `The beam: ${nodes.length} node(s) over ${Math.max(m.iterations_run, ...nodes.map((n) => n.iteration), 0)} iteration(s)` }),
      el('p', { class: 'muted', text: 'Each candidate sits at the iteration that made it, linked to the candidate it rewrote; colour is its verdict, size its speedup. Click one for its details.' }),
      tree,
      el('div', { class: 'grid2' },
        el('section', {}, el('h2', { text: 'Best speedup per iteration' }), best),
        el('section', {}, el('h2', { text: 'Roofline' }), roof)),
      el('h2', { text: 'Candidates' }), table(),
      el('h2', { text: 'Selected candidate' }), details(),
      el('h2', { text: 'Failures by stage' }), failures(),
      el('h2', { text: 'What the optimization memory learned' }), experiences(),
      el('footer', { text: `AccelOpt search report${m.run_id ? ` · accelopt runs show ${m.run_id}` : ''} · ${m.path}` }));
    const wrap = document.querySelector('.table-wrap');
    if (wrap) wrap.scrollTop = scroll;
    if (!charts) {
      tree.replaceChildren(el('div', { class: 'chart-note', text: 'Plotly did not load: the charts cannot be drawn.' }));
      return;
    }
    drawTree(tree);
    drawBest(best);
    drawRoofline(roof);
  }

  function select(id) {
    selected = id;
    render();
    const row = document.querySelector(`tr[data-id="${CSS.escape(id)}"]`);
    if (row) row.scrollIntoView({ block: 'nearest' });
  }

  function merge(delta) {
    if (!view) return;
    const at = new Map(view.nodes.map((n, i) => [n.id, i]));
    for (const node of delta.nodes || []) {
      if (at.has(node.id)) view.nodes[at.get(node.id)] = node;
      else {
        at.set(node.id, view.nodes.length);
        view.nodes.push(node);
      }
    }
    for (const key of ['state', 'meta', 'best', 'roofline', 'experiences']) {
      if (key in delta) view[key] = delta[key];
    }
  }

  window.addEventListener('message', (event) => {
    const msg = event.data || {};
    if (msg.type === 'view') view = msg.view;
    else if (msg.type === 'delta') merge(msg.delta || {});
    else return;
    render();
  });

  const data = document.getElementById('accelopt-view');
  const text = data ? data.textContent.trim() : '';
  let unreadable = null;
  if (text) {
    try {
      view = JSON.parse(text);
    } catch (err) {
      unreadable = err;
    }
  }
  if (unreadable) {
    document.getElementById('app').replaceChildren(el('p', { class: 'note error', text: `The report's data cannot be read: ${unreadable}` }));
  } else {
    render();
  }
  if (vscode) vscode.postMessage({ type: 'ready' });
})();
