// The dashboard's progressive enhancement: the server sends complete pages (tables that work without
// JavaScript); this script adds live updates, sparklines, uPlot charts, the time range (presets, custom,
// drag-zoom, URL) and auto-refresh. It reads the same JSON API as scripts do, with the session cookie.
// Everything an agent supplied reaches the DOM through textContent or attributes, never as markup.
'use strict';

(function () {
  const main = document.querySelector('main[data-page]');
  if (!main) return;
  const kind = main.dataset.page;
  const uPlot = window.uPlot;

  // ---- formatting -------------------------------------------------------------------------------
  const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  function fmtBytes(v) {
    let i = 0;
    let x = Math.abs(v);
    while (x >= 1024 && i < BYTE_UNITS.length - 1) { x /= 1024; i++; }
    return (v < 0 ? '-' : '') + (x >= 100 || i === 0 ? x.toFixed(0) : x.toFixed(1)) + ' ' + BYTE_UNITS[i];
  }
  const FORMATS = {
    percent: (v) => v.toFixed(1) + ' %',
    bytes: fmtBytes,
    rate: (v) => fmtBytes(v) + '/s',
    load: (v) => v.toFixed(2),
    number: (v) => (Math.abs(v) >= 1000 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(2)),
  };
  function fmt(v, unit) {
    return v === null || v === undefined || Number.isNaN(v) ? '—' : FORMATS[unit](v);
  }
  // The same rules as src/metrics/dashboard/units.ts.
  function unitOf(metric) {
    if (/(?:^|\.)(?:usage|percent)$/.test(metric) || metric.startsWith('cpu.perCore.')) return 'percent';
    if (metric.startsWith('cpu.loadAverage.')) return 'load';
    if (/(?:^|\.)(?:total|used|free|available|swapTotal|swapUsed|swapFree|\w*Bytes)$/.test(metric)) return 'bytes';
    return 'number';
  }
  const pad = (n) => String(n).padStart(2, '0');
  function localTime(ts) {
    const d = new Date(ts);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function utcTime(ts) {
    return new Date(ts).toISOString().slice(11, 19) + ' UTC';
  }
  /** As the server writes times in tables (format.ts formatAbsolute): one zone for every viewer of a shared page. */
  function absoluteUtc(ts) {
    return new Date(ts).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
  }
  function relative(ts, now) {
    const diff = now - ts;
    const abs = Math.abs(diff);
    if (abs < 5000) return 'just now';
    const amount = abs < 60000 ? Math.floor(abs / 1000) + ' s' : abs < 3600000 ? Math.floor(abs / 60000) + ' min' : abs < 86400000 ? Math.floor(abs / 3600000) + ' h' : Math.floor(abs / 86400000) + ' d';
    return diff >= 0 ? amount + ' ago' : 'in ' + amount;
  }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  // ---- time range -------------------------------------------------------------------------------
  const PRESETS = { '15m': 15 * 60000, '1h': 3600000, '6h': 6 * 3600000, '24h': 86400000, '7d': 7 * 86400000, '30d': 30 * 86400000 };
  const PRESET_LABELS = { '15m': '15 min', '1h': '1 h', '6h': '6 h', '24h': '24 h', '7d': '7 d', '30d': '30 d' };
  /** A time in ms as the server reads one (time-range.ts parseInstant): up to 16 digits, at most the largest Date. */
  function instant(text) {
    return /^\d{1,16}$/.test(text || '') && Number(text) <= 8.64e15 ? Number(text) : undefined;
  }
  function rangeFromUrl() {
    const p = new URLSearchParams(location.search);
    const from = instant(p.get('from'));
    const to = instant(p.get('to'));
    if (from !== undefined && to !== undefined && from < to) return { from, to, preset: null };
    const bar = document.querySelector('.range-bar');
    // The server read forms the browser cannot (a UTC datetime from the form without JavaScript).
    if (bar && !bar.dataset.preset && !p.get('range')) return { from: Number(bar.dataset.from), to: Number(bar.dataset.to), preset: null };
    const preset = Object.hasOwn(PRESETS, p.get('range') || '') ? p.get('range') : '1h';
    const now = Date.now();
    return { from: now - PRESETS[preset], to: now, preset };
  }
  let range = rangeFromUrl();
  /** Ranges ending now move with the clock. */
  function liveRange() {
    if (!range.preset) return range;
    const now = Date.now();
    range = { from: now - PRESETS[range.preset], to: now, preset: range.preset };
    return range;
  }
  function rangeParams(r) {
    return r.preset ? { range: r.preset } : { from: String(r.from), to: String(r.to) };
  }
  function setRange(r, push) {
    range = r;
    const p = new URLSearchParams(location.search);
    p.delete('range'); p.delete('from'); p.delete('to');
    for (const [k, v] of Object.entries(rangeParams(r))) p.set(k, v);
    const url = location.pathname + '?' + p.toString();
    if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
    showRange();
    restartRefresh();
    load();
  }
  function toLocalInput(ts) {
    const d = new Date(ts);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + 'T' + pad(d.getHours()) + ':' + pad(d.getMinutes());
  }
  const bar = document.querySelector('.range-bar');
  let paused = false;
  let pauseButton = null;
  function showRange() {
    if (!bar) return;
    for (const a of bar.querySelectorAll('a[data-range]')) {
      if (a.dataset.range === range.preset) a.setAttribute('aria-current', 'true'); else a.removeAttribute('aria-current');
    }
    const form = bar.querySelector('form.custom-range');
    form.elements.from.value = toLocalInput(range.from);
    form.elements.to.value = toLocalInput(range.to);
    bar.querySelector('.range-text').textContent = range.preset
      ? 'Last ' + PRESET_LABELS[range.preset] + ', ending now'
      : localTime(range.from).slice(0, 16) + ' – ' + localTime(range.to).slice(0, 16) + ' (local time)';
    pauseButton.hidden = !range.preset;
    pauseButton.textContent = paused ? 'Resume auto-refresh' : 'Pause auto-refresh';
    pauseButton.setAttribute('aria-pressed', String(paused));
    for (const a of document.querySelectorAll('a[data-keep-range]')) {
      const u = new URL(a.href);
      u.searchParams.delete('range'); u.searchParams.delete('from'); u.searchParams.delete('to');
      for (const [k, v] of Object.entries(rangeParams(range))) u.searchParams.set(k, v);
      a.href = u.pathname + u.search;
    }
  }
  if (bar) {
    pauseButton = el('button', { type: 'button', class: 'pause', 'aria-pressed': 'false' });
    pauseButton.addEventListener('click', () => { paused = !paused; showRange(); restartRefresh(); });
    bar.querySelector('.range-now').append(' ', pauseButton);
    for (const a of bar.querySelectorAll('a[data-range]')) {
      a.addEventListener('click', (ev) => {
        ev.preventDefault();
        const now = Date.now();
        setRange({ from: now - PRESETS[a.dataset.range], to: now, preset: a.dataset.range }, true);
      });
    }
    bar.querySelector('form.custom-range').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const f = ev.target.elements;
      // datetime-local values carry no zone: the Date constructor reads them as the viewer's local time.
      const from = new Date(f.from.value).getTime();
      const to = new Date(f.to.value).getTime();
      if (!(from < to)) { f.to.setCustomValidity('The end must be after the start.'); f.to.reportValidity(); return; }
      f.to.setCustomValidity('');
      setRange({ from, to, preset: null }, true);
    });
  }
  window.addEventListener('popstate', () => {
    range = rangeFromUrl();
    if (kind === 'host') openMetric = new URLSearchParams(location.search).get('metric');
    showRange();
    restartRefresh();
    load();
  });

  /** The whole document is parsed: a streamed page's later part (after this script) is in the DOM. */
  const parsed = new Promise((resolve) => {
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', resolve, { once: true });
    else resolve();
  });

  // ---- refresh ----------------------------------------------------------------------------------
  let timer = null;
  /** Charts of a range ending now refresh about every 1/120 of the range (10 s to 5 min). */
  function refreshMs() {
    return Math.min(300000, Math.max(10000, (range.to - range.from) / 120));
  }
  function restartRefresh() {
    if (timer) clearInterval(timer);
    timer = null;
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = null;
    // The host list has its own 10 s poll (statuses change with silence, not only with new data).
    if (kind === 'hosts') return;
    if (range.preset && !paused) timer = setInterval(() => { if (!document.hidden) load(); }, refreshMs());
  }

  /**
   * A read the network holds without an answer, or whose answer stops half way (a link gone silent: Wi-Fi that
   * dropped, a laptop that slept), fails after this: loads run one at a time, so one read waiting for good would stop
   * every refresh after it, with no word on the page.
   */
  const REQUEST_TIMEOUT_MS = 30000;
  async function getJson(path, params) {
    const qs = new URLSearchParams(params).toString();
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new Error('no answer within ' + REQUEST_TIMEOUT_MS / 1000 + ' s')), REQUEST_TIMEOUT_MS);
    try {
      // The request the page's preload link makes (the API answers JSON), so that response is reused.
      const res = await fetch(path + (qs ? '?' + qs : ''), { signal: abort.signal });
      if (res.status === 401) { location.assign('/signin'); throw new Error('signed out'); }
      if (!res.ok) throw new Error(path + ' answered HTTP ' + res.status);
      return await res.json();
    } finally {
      clearTimeout(timer);
    }
  }
  const notice = el('p', { class: 'notice', role: 'status', hidden: true });
  main.prepend(notice);
  let retryTimer = null;
  function showProblem(e) {
    // A range ending now retries at its next refresh (the host list at its 10 s poll); any other, in 30 s.
    const refreshes = timer !== null || kind === 'hosts';
    if (!refreshes && !retryTimer) retryTimer = setTimeout(() => { retryTimer = null; load(); }, 30000);
    notice.hidden = false;
    notice.textContent = 'Could not refresh: ' + (e && e.message ? e.message : String(e)) + (refreshes ? '. Retrying at the next refresh.' : '. Retrying in 30 s.');
  }
  let loads = 0;
  let loading = null;
  function load() {
    // One load at a time; a request made while one runs is served by a fresh load right after.
    if (loading) { loading.again = true; return loading.promise; }
    const state = { again: false, promise: null };
    loading = state;
    state.promise = (async () => {
      try {
        await LOADERS[kind]();
        notice.hidden = true;
        loads += 1;
        main.dataset.loaded = String(loads);
      } catch (e) {
        showProblem(e);
      } finally {
        loading = null;
        if (state.again) load();
      }
    })();
    return state.promise;
  }

  // ---- charts -----------------------------------------------------------------------------------
  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function palette() {
    return [1, 2, 3, 4, 5, 6, 7, 8].map((i) => cssVar('--c' + i));
  }
  /**
   * Per-second rates of a counter. Over raw reports, between neighbours. Over
   * bucket means, across `span` buckets: a bucket's mean sits wherever its
   * reports fell, so neighbouring buckets alone would jitter.
   */
  function rates(timestamps, values, span) {
    const out = [];
    for (let i = 0; i < values.length; i++) {
      const j = Math.max(0, i - span);
      const a = values[j];
      const b = values[i];
      const dt = (timestamps[i] - timestamps[j]) / 1000;
      // A counter that went backwards was reset (reboot, interface recreated): no rate across the reset.
      out.push(i === 0 || a === null || b === null || dt <= 0 || b < a ? null : (b - a) / dt);
    }
    return out;
  }
  const naturally = new Intl.Collator('en', { numeric: true }).compare;
  /**
   * The standard charts, from the metric names present; each line names its metric. Counters (throughput) are
   * charted per host only: the fleet's average of raw counters is no rate (hosts' counters start anywhere, so a host
   * missing from one bucket moves the average by its whole counter).
   */
  function chartDefs(names, counters) {
    const has = (n) => names.includes(n);
    const defs = [];
    if (has('cpu.usage')) defs.push({ id: 'cpu', title: 'CPU', unit: 'percent', max: 100, lines: [{ metric: 'cpu.usage', label: 'CPU', band: true }] });
    const cores = names.filter((n) => /^cpu\.perCore\.\d+$/.test(n)).sort(naturally);
    if (cores.length) defs.push({ id: 'cpu-cores', title: 'CPU per core', unit: 'percent', max: 100, lines: cores.map((n) => ({ metric: n, label: 'core ' + n.slice(12) })) });
    const load = ['0', '1', '2'].map((i) => 'cpu.loadAverage.' + i).filter(has);
    if (load.length) defs.push({ id: 'load', title: 'Load average', unit: 'load', lines: load.map((n) => ({ metric: n, label: { 0: '1 min', 1: '5 min', 2: '15 min' }[n.slice(-1)] })) });
    if (has('memory.used')) {
      defs.push({ id: 'memory', title: 'Memory', unit: 'bytes', lines: [{ metric: 'memory.used', label: 'used', band: true }, ...(has('memory.total') ? [{ metric: 'memory.total', label: 'total' }] : [])] });
    } else if (has('memory.percent')) {
      defs.push({ id: 'memory', title: 'Memory', unit: 'percent', max: 100, lines: [{ metric: 'memory.percent', label: 'used', band: true }] });
    }
    // The host agent sends memory.swap.used/total (docs/host-agent.md); memory.swapUsed/swapTotal are accepted too.
    const swapUsed = has('memory.swap.used') ? 'memory.swap.used' : has('memory.swapUsed') ? 'memory.swapUsed' : undefined;
    const swapTotal = has('memory.swap.total') ? 'memory.swap.total' : has('memory.swapTotal') ? 'memory.swapTotal' : undefined;
    if (swapUsed) defs.push({ id: 'swap', title: 'Swap', unit: 'bytes', lines: [{ metric: swapUsed, label: 'used', band: true }, ...(swapTotal ? [{ metric: swapTotal, label: 'total' }] : [])] });
    for (const n of names.filter((x) => /^disk\..+\.percent$/.test(x)).sort(naturally)) {
      const path = n.slice(5, -8);
      defs.push({ id: 'fs:' + path, title: 'Filesystem ' + path, unit: 'percent', max: 100, lines: [{ metric: n, label: 'used', band: true }] });
    }
    if (!counters) return defs;
    const net = names.filter((n) => /^network\.(?:.+\.)?(?:rx|tx)Bytes$/.test(n)).sort(naturally);
    if (net.length) defs.push({ id: 'network', title: 'Network throughput', unit: 'rate', lines: net.map((n) => ({ metric: n, label: n.slice(8, -5).replace(/\.?(rx|tx)$/, ' $1').trim(), rate: true })) });
    // Per device from the agent's diskio.<device>.readBytes/writeBytes counters (or per path as disk.<path>.readBytes).
    const io = names.filter((n) => /^(?:diskio|disk)\..+\.(?:read|write)Bytes$/.test(n)).sort(naturally);
    if (io.length) defs.push({ id: 'disk-io', title: 'Disk throughput', unit: 'rate', lines: io.map((n) => ({ metric: n, label: n.slice(n.indexOf('.') + 1, -5).replace(/\.(read|write)$/, ' $1'), rate: true })) });
    return defs;
  }
  function metricDef(name) {
    return { id: 'metric:' + name, title: name, unit: unitOf(name), lines: [{ metric: name, label: name, band: true }], extra: true };
  }

  /** uPlot's data (times, then each line, its min and max) and its series/band options for one chart. */
  function plotData(def, series) {
    const ts = series.timestamps;
    const colors = palette();
    const data = [ts];
    // Local time and UTC; once only where they are the same.
    const opts = [{ label: 'Time', value: (u, v) => (v === null ? '—' : new Date(v).getTimezoneOffset() === 0 ? absoluteUtc(v) : localTime(v) + ' · ' + utcTime(v)) }];
    const bands = [];
    def.lines.forEach((line, i) => {
      const values = series.metrics[line.metric] || ts.map(() => null);
      const color = colors[i % colors.length];
      data.push(line.rate ? rates(ts, values, series.bucketMs ? 3 : 1) : values);
      // A point with no neighbour draws no line: it is marked, so a single report (or one between gaps) shows.
      opts.push({ label: line.label, stroke: color, width: 1.5, value: (u, v) => fmt(v, def.unit), points: { show: true, size: 6, fill: color, filter: lonePoints } });
      const lo = series.min && series.min[line.metric];
      const hi = series.max && series.max[line.metric];
      if (line.band && lo && hi && !line.rate) {
        data.push(lo, hi);
        const at = data.length - 2;
        const faint = { stroke: 'transparent', width: 0, points: { show: false }, value: (u, v) => fmt(v, def.unit) };
        opts.push({ ...faint, label: 'min' }, { ...faint, label: 'max' });
        bands.push({ series: [at + 1, at], fill: cssVar('--band') });
      }
    });
    return { data, series: opts, bands };
  }

  function lonePoints(u, si) {
    const ys = u.data[si];
    const out = [];
    for (let i = 0; i < ys.length; i++) {
      if (ys[i] !== null && ys[i] !== undefined && (ys[i - 1] === null || ys[i - 1] === undefined) && (ys[i + 1] === null || ys[i + 1] === undefined)) out.push(i);
    }
    return out;
  }
  /** The time the charts span: the window asked for, so a host that stopped reporting shows the silence. */
  let xWindow = null;
  const charts = new Map();
  const chartsSection = document.querySelector('section.charts');
  /** Charts sit in a grid (two columns on wide screens); a chart takes its cell's width. */
  function chartWidth(holder) {
    const cell = holder ? holder.clientWidth - 16 : 0;
    if (cell > 0) return Math.max(200, cell);
    const columns = getComputedStyle(chartsSection).gridTemplateColumns.split(' ').length || 1;
    return Math.max(200, Math.floor((chartsSection.clientWidth || 600) / columns) - 24);
  }
  function chartHeight() {
    return window.innerWidth < 640 ? 170 : 210;
  }
  /** Room for the longest tick label ("97.7 KiB/s"), measured with the axis font. */
  function axisSize(u, values) {
    if (!values || !u.axes[1].font) return 50;
    const ctx = u.ctx;
    ctx.save();
    ctx.font = u.axes[1].font[0];
    const widest = Math.max(...values.map((v) => ctx.measureText(v).width));
    ctx.restore();
    return Math.ceil(widest / (window.devicePixelRatio || 1)) + 18;
  }
  function makePlot(def, holder, prepared, width) {
    const unit = def.unit;
    const text = cssVar('--muted');
    const grid = cssVar('--line');
    const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const opts = {
      width,
      height: chartHeight(),
      ms: 1,
      series: prepared.series,
      bands: prepared.bands,
      legend: { live: true },
      cursor: { sync: { key: 'dashboard', setSeries: false }, drag: { x: true, y: false, setScale: false } },
      scales: { x: { time: true, range: (u, min, max) => (xWindow ? [xWindow.from, xWindow.to] : [min, max]) }, y: { range: (u, min, max) => (def.max ? [0, Math.max(def.max, max || 0)] : [Math.min(0, min || 0), max > 0 ? max * 1.1 : 1]) } },
      axes: [{ ...axis }, { ...axis, size: axisSize, values: (u, vals) => vals.map((v) => fmt(v, unit)) }],
      hooks: {
        setSelect: [(u) => {
          if (u.select.width < 3) return;
          const from = Math.round(u.posToVal(u.select.left, 'x'));
          const to = Math.round(u.posToVal(u.select.left + u.select.width, 'x'));
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          if (to > from) setRange({ from, to, preset: null }, true);
        }],
        draw: [() => {
          holder.dataset.drawn = String(Number(holder.dataset.drawn || 0) + 1);
          // When the chart first appeared, since navigation start (the dashboard benchmark reads it).
          if (!holder.dataset.drawnAt) holder.dataset.drawnAt = String(Math.round(performance.now()));
        }],
        // Away from the cursor the legend shows the latest values rather than dashes.
        setCursor: [(u) => { if (u.cursor.idx === null || u.cursor.idx === undefined) showLatest(u); }],
      },
    };
    return new uPlot(opts, prepared.data, holder.querySelector('.plot'));
  }
  function showLatest(u) {
    const ts = u.data[0];
    if (ts.length) u.setLegend({ idx: ts.length - 1 });
  }
  function describe(holder, def, prepared) {
    // For people (screen readers) and for the browser tests: what the chart holds.
    const firstLine = prepared.data[1] || [];
    const present = firstLine.filter((v) => v !== null && v !== undefined);
    holder.dataset.points = String(present.length);
    holder.dataset.lines = String(def.lines.length);
    holder.dataset.bands = String(prepared.bands.length);
    holder.dataset.last = present.length ? String(present[present.length - 1]) : '';
    if (xWindow) { holder.dataset.from = String(xWindow.from); holder.dataset.to = String(xWindow.to); }
    holder.setAttribute('aria-label', def.title + ': ' + present.length + ' points' + (present.length ? ', latest ' + fmt(present[present.length - 1], def.unit) : ''));
  }
  function drawCharts(series, defs) {
    const keep = new Set(defs.map((d) => d.id));
    for (const [id, c] of charts) {
      if (!keep.has(id)) { c.plot.destroy(); c.holder.remove(); charts.delete(id); }
    }
    let previous = null;
    const created = [];
    for (const def of defs) {
      const prepared = plotData(def, series);
      let c = charts.get(def.id);
      if (c && c.shape !== prepared.series.length) { c.plot.destroy(); c.holder.remove(); charts.delete(def.id); c = undefined; }
      if (!c) {
        const holder = el('figure', { class: 'chart' + (def.extra ? ' extra' : ''), 'data-chart': def.id, role: 'img' },
          el('figcaption', {}, def.title, def.extra ? closeButton(def) : null), el('div', { class: 'plot' }));
        if (previous) previous.after(holder); else chartsSection.prepend(holder);
        c = { holder, plot: null, shape: prepared.series.length, def };
        charts.set(def.id, c);
        created.push([c, prepared]);
      } else {
        c.plot.setData(prepared.data);
        if (c.plot.cursor.idx === null || c.plot.cursor.idx === undefined) showLatest(c.plot);
        describe(c.holder, def, prepared);
      }
      previous = c.holder;
    }
    // Widths are read once per kind of cell, after every new holder is in place: one layout, not one per chart.
    const widths = new Map();
    for (const [c] of created) if (!widths.has(c.def.extra)) widths.set(c.def.extra, chartWidth(c.holder));
    for (const [c, prepared] of created) {
      c.plot = makePlot(c.def, c.holder, prepared, widths.get(c.def.extra));
      showLatest(c.plot);
      describe(c.holder, c.def, prepared);
    }
    let empty = chartsSection.querySelector('.none');
    if (!defs.length || !series.timestamps.length) {
      if (!empty) { empty = el('p', { class: 'none' }, 'No reports in this range.'); chartsSection.append(empty); }
    } else if (empty) {
      empty.remove();
    }
  }
  function closeButton(def) {
    const b = el('button', { type: 'button', class: 'close', 'aria-label': 'Close the chart of ' + def.title }, '×');
    b.addEventListener('click', () => { openMetric = null; syncMetricParam(); redraw(); });
    return b;
  }
  function rebuildCharts() {
    for (const c of charts.values()) { c.plot.destroy(); c.holder.remove(); }
    charts.clear();
    redraw();
  }
  if (chartsSection) {
    let lastWidth = 0;
    new ResizeObserver(() => {
      const w = chartsSection.clientWidth;
      if (Math.abs(w - lastWidth) < 4) return;
      lastWidth = w;
      for (const c of charts.values()) c.plot.setSize({ width: chartWidth(c.holder), height: chartHeight() });
    }).observe(chartsSection);
  }
  // Canvas colours come from the CSS variables: redraw charts and sparklines when the system switches light/dark.
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    if (chartsSection) rebuildCharts();
    if (kind === 'hosts') renderHosts();
  });
  /**
   * The first request asks exactly what the page preloads (the server's range
   * and window): its response is already coming. Once only: a retry after a
   * failure asks for the range as it is then.
   */
  let preloaded = main.dataset.series;
  function seriesRequest(path, r) {
    const url = preloaded;
    preloaded = undefined;
    const params = url ? Object.fromEntries(new URL(url, location.href).searchParams) : { ...seriesWindow(r), minmax: 'true' };
    xWindow = { from: Number(params.from), to: Number(params.to) };
    return url ? [url, {}] : [path, params];
  }
  const HOUR = 3600000;
  /** The largest budget a request may ask, from the server: `--series-points-max`, or less for a tenant's fleet page. */
  const maxPoints = Number(main.dataset.maxPoints);
  /** At most 1000 points; fewer under a lower cap (the fleet page of a tenant with thousands of metric names). */
  const budget = Math.min(1000, maxPoints);
  /**
   * What a chart asks the API for. Up to 3 days: the range itself at up to
   * 1000 points (about two per pixel of a wide chart, and up to 2.7 h of 10 s
   * reports come back raw). Longer: the range widened to whole hours at one
   * point per hour, so the storage answers from its hourly rollups (exact
   * means, min and max) instead of reading every report; 720 points for 30 days.
   * Past the budget (a range of years) a point per whole number of hours.
   * The server applies the same rule to the page's preload (time-range.ts).
   */
  function seriesWindow(r) {
    if (r.to - r.from < 72 * HOUR) return { from: String(r.from), to: String(r.to), points: String(budget) };
    const from = Math.floor(r.from / HOUR) * HOUR;
    const hours = Math.ceil((r.to + 1 - from) / HOUR);
    const step = Math.ceil(hours / budget);
    const points = Math.ceil(hours / step);
    return { from: String(from), to: String(from + points * step * HOUR - 1), points: String(points) };
  }

  // ---- alerts table -----------------------------------------------------------------------------
  function renderAlerts(alerts, showHost) {
    const box = document.querySelector('.alerts-list');
    if (!box) return;
    if (!alerts.length) { box.replaceChildren(el('p', { class: 'none alerts-empty' }, 'No alerts in this range.')); return; }
    const head = el('tr', {}, el('th', { scope: 'col' }, 'Alert'), showHost ? el('th', { scope: 'col' }, 'Host') : null,
      el('th', { scope: 'col' }, 'State'), el('th', { scope: 'col' }, 'Started'), el('th', { scope: 'col' }, 'Notified'));
    const rows = alerts.map((a) => el('tr', { class: 'alert ' + a.severity, 'data-alert-id': String(a.id) },
      el('th', { scope: 'row', 'data-label': 'Alert' }, el('span', { class: 'sev ' + a.severity }, a.severity), ' ', el('span', { class: 'alert-name' }, a.name),
        a.message ? el('span', { class: 'alert-message' }, a.message) : null),
      showHost ? el('td', { 'data-label': 'Host' }, el('a', { href: '/hosts/' + encodeURIComponent(a.hostId) }, a.hostId)) : null,
      el('td', { 'data-label': 'State' }, a.resolvedAt === null ? el('span', { class: 'state firing' }, 'firing')
        : el('span', {}, el('span', { class: 'state resolved' }, 'resolved'), ' ', el('span', { class: 'absolute' }, absoluteUtc(a.resolvedAt)))),
      el('td', { 'data-label': 'Started' }, el('time', { datetime: new Date(a.startsAt).toISOString() }, absoluteUtc(a.startsAt))),
      el('td', { 'data-label': 'Notified' }, ...(a.routes.length ? a.routes.map((r) => el('span', { class: 'route ' + r.outcome, title: r.error || '' }, r.route + ': ' + r.outcome)) : [el('span', { class: 'missing' }, '—')]))));
    box.replaceChildren(el('div', { class: 'table-wrap' }, el('table', { class: 'alerts' }, el('thead', {}, head), el('tbody', {}, ...rows))));
  }

  // ---- host page --------------------------------------------------------------------------------
  let openMetric = kind === 'host' ? main.dataset.metric || null : null;
  let lastSeries = null;
  function syncMetricParam() {
    const p = new URLSearchParams(location.search);
    if (openMetric) p.set('metric', openMetric); else p.delete('metric');
    history.replaceState(null, '', location.pathname + '?' + p.toString());
  }
  function redraw() {
    if (!lastSeries) return;
    const defs = chartDefs(Object.keys(lastSeries.metrics), kind === 'host');
    if (openMetric) defs.unshift(metricDef(openMetric));
    drawCharts(lastSeries, defs);
  }
  function renderMetricTable(series) {
    const box = document.querySelector('.metrics-list');
    if (!box) return;
    const names = Object.keys(series.metrics);
    const old = box.querySelector('.table-wrap, .none');
    if (!names.length) { const p = el('p', { class: 'none' }, 'No reports in this range.'); if (old) old.replaceWith(p); else box.append(p); return; }
    const stat = (arr, pick) => { const xs = (arr || []).filter((v) => v !== null); return xs.length ? pick(xs) : null; };
    const rows = names.map((n) => {
      const unit = unitOf(n);
      const mean = stat(series.metrics[n], (xs) => xs.reduce((a, b) => a + b, 0) / xs.length);
      const lo = stat(series.min ? series.min[n] : series.metrics[n], (xs) => Math.min(...xs));
      const hi = stat(series.max ? series.max[n] : series.metrics[n], (xs) => Math.max(...xs));
      const link = el('a', { href: location.pathname + '?' + new URLSearchParams({ metric: n, ...rangeParams(range) }), 'data-metric': n }, n);
      return el('tr', {}, el('th', { scope: 'row', 'data-label': 'Metric' }, link), el('td', { 'data-label': 'Mean' }, fmt(mean, unit)),
        el('td', { 'data-label': 'Min' }, fmt(lo, unit)), el('td', { 'data-label': 'Max' }, fmt(hi, unit)));
    });
    const table = el('div', { class: 'table-wrap' }, el('table', { class: 'metrics' },
      el('thead', {}, el('tr', {}, ...['Metric', 'Mean', 'Min', 'Max'].map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {}, ...rows)));
    if (old) old.replaceWith(table); else box.append(table);
  }
  if (kind === 'host') {
    // On <main>: the list arrives after this script in the page's stream.
    main.addEventListener('click', (ev) => {
      const a = ev.target.closest('.metrics-list a[data-metric]');
      if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
      ev.preventDefault();
      openMetric = a.dataset.metric;
      syncMetricParam();
      redraw();
      const c = charts.get('metric:' + openMetric);
      if (c) c.holder.scrollIntoView({ block: 'nearest' });
    });
  }

  const LOADERS = {
    async host() {
      const r = liveRange();
      const id = main.dataset.hostId;
      const [series, alerts, status, summary] = await Promise.all([
        getJson(...seriesRequest('/api/v1/host/' + encodeURIComponent(id), r)),
        getJson('/api/v1/alerts', { host: id, from: r.from, to: r.to, limit: '50' }),
        // The header's status and last report move with time even when the range is fixed; skipped on the first load, which the server rendered.
        loads === 0 ? null : getJson('/api/v1/hosts/status'),
        // The table of every metric: the range as one point, exact whatever the chart's buckets (the server rendered the first).
        loads === 0 ? null : getJson('/api/v1/host/' + encodeURIComponent(id), { from: r.from, to: r.to, points: '1', minmax: 'true' }),
      ]);
      const me = status && status.hosts.find((x) => x.hostId === id);
      if (me) {
        const badge = document.querySelector('.page-head .status');
        badge.className = 'status ' + me.status;
        badge.textContent = me.status;
        const last = document.querySelector('.page-head .last-report');
        last.textContent = relative(me.lastTs, status.now);
        last.setAttribute('datetime', new Date(me.lastTs).toISOString());
        last.setAttribute('title', localTime(me.lastTs) + ' · ' + utcTime(me.lastTs));
      }
      lastSeries = series;
      redraw();
      // The table and alerts come after the charts in the page's stream: drawn first, the rest once it is there.
      await parsed;
      if (summary) renderMetricTable(summary);
      renderAlerts(alerts, false);
    },
    async fleet() {
      const r = liveRange();
      // The first load's top lists and host times came with the page.
      const [answer, alerts, status, tops] = await Promise.all([
        getJson(...seriesRequest('/api/v1/aggregate', r)),
        getJson('/api/v1/alerts', { from: r.from, to: r.to, limit: '50' }),
        loads === 0 ? null : getJson('/api/v1/hosts/status'),
        // The three lists in one pass over the hosts.
        loads === 0 ? null : getJson('/api/v1/top/lists', { metrics: 'cpu.usage,memory.percent,disk', from: r.from, to: r.to, limit: '10' }),
      ]);
      const until = status ? reportedUntil(status) : main.dataset.reportedUntil ? Number(main.dataset.reportedUntil) : undefined;
      const series = reportedPart(answer, until);
      lastSeries = series;
      redraw();
      // The top lists and alerts come after the charts in the page's stream: drawn first, the rest once it is there.
      await parsed;
      const count = document.querySelector('.fleet-hosts');
      if (count) count.textContent = String(series.hosts);
      renderAlerts(alerts, true);
      if (tops) [['cpu', 'cpu.usage'], ['memory', 'memory.percent'], ['disk', 'disk']].forEach(([key, metric]) => renderTop(key, tops.lists[metric]));
    },
    async hosts() {
      const r = liveRange();
      const [status, sparks] = await Promise.all([
        getJson('/api/v1/hosts/status'),
        sparkDue() ? getJson('/api/v1/sparklines', { metric: 'cpu.usage', from: r.from, to: r.to, points: String(Math.min(60, maxPoints)) }) : null,
      ]);
      if (sparks) { sparkData = new Map(sparks.map((s) => [s.hostId, s])); sparkAt = Date.now(); sparkRange = rangeKey(); }
      hostStatus = status;
      renderHosts();
    },
  };

  /**
   * The fleet's series up to the last bucket every host that is not down has
   * reported in: a later bucket averages only the hosts that have reported
   * so far (each reports at its own phase), so the line would dip and the band
   * narrow to a few hosts at the right edge. `until` is the oldest latest
   * report of those hosts (undefined when all are down: nothing is left out).
   */
  function reportedPart(series, until) {
    const ts = series.timestamps;
    let n = ts.length;
    if (until === undefined) return series;
    while (n > 1 && ts[n - 1] > until) n--;
    if (n === ts.length) return series;
    const cut = (columns) => columns && Object.fromEntries(Object.entries(columns).map(([name, values]) => [name, values.slice(0, n)]));
    return { ...series, timestamps: ts.slice(0, n), metrics: cut(series.metrics), min: cut(series.min), max: cut(series.max) };
  }
  /** The same rule as the server's reportedUntil (src/metrics/domain/host-status.ts). */
  function reportedUntil(status) {
    const times = status.hosts.filter((h) => h.status !== 'down').map((h) => h.lastTs);
    return times.length ? Math.min(...times) : undefined;
  }

  function renderTop(key, rows) {
    const box = document.querySelector('.top[data-top="' + key + '"]');
    if (!box) return;
    const old = box.querySelector('ol, .none');
    const next = rows.length
      ? el('ol', { class: 'top-list' }, ...rows.map((row) => el('li', {},
        el('a', { href: '/hosts/' + encodeURIComponent(row.hostId), 'data-keep-range': '' }, row.hostname),
        key === 'disk' ? el('span', { class: 'fs' }, ' ' + row.metric.slice(5, -8)) : null, ' ', el('span', { class: 'value' }, fmt(row.value, 'percent')))))
      : el('p', { class: 'none' }, 'No data in this range.');
    if (old) old.replaceWith(next); else box.append(next);
    showRange();
  }

  // ---- host list --------------------------------------------------------------------------------
  let hostStatus = null;
  let sparkData = new Map();
  let sparkAt = 0;
  let sparkRange = '';
  /** Statuses refresh every load (10 s); sparklines as often as the charts would for the range. */
  function sparkDue() {
    if (rangeKey() !== sparkRange) return true;
    return range.preset !== null && Date.now() - sparkAt >= refreshMs() - 1000;
  }
  function rangeKey() {
    return range.preset || range.from + ':' + range.to;
  }
  const table = document.querySelector('table.hosts');
  const listState = (() => {
    const p = new URLSearchParams(location.search);
    return { sort: table ? table.dataset.sort : 'name', dir: table ? table.dataset.dir : 'asc', q: p.get('q') || '' };
  })();
  const SORT_FIRST = { name: 'asc', status: 'desc', platform: 'asc', cpu: 'desc', memory: 'desc', disk: 'desc', last: 'desc' };
  const STATUS_RANK = { up: 0, late: 1, down: 2 };
  function sortKey(h) {
    switch (listState.sort) {
      case 'name': return h.hostname.toLowerCase();
      case 'status': return STATUS_RANK[h.status];
      case 'platform': return h.platform.toLowerCase();
      case 'cpu': return h.cpuUsage;
      case 'memory': return h.memoryPercent;
      case 'disk': return h.diskPercent;
      default: return h.lastTs;
    }
  }
  function gauge(value, label) {
    if (value === null) return [el('span', { class: 'value missing' }, '—')];
    const v = Math.min(100, Math.max(0, value)).toFixed(1);
    return [el('meter', { min: '0', max: '100', low: '70', high: '90', optimum: '0', value: v, 'aria-label': label }, fmt(value, 'percent')), el('span', { class: 'value' }, fmt(value, 'percent'))];
  }
  function drawSpark(holder, spark) {
    const w = 96;
    const h = 24;
    const ratio = window.devicePixelRatio || 1;
    let canvas = holder.querySelector('canvas');
    if (!canvas) {
      canvas = el('canvas', { width: String(w * ratio), height: String(h * ratio), class: 'spark-canvas' });
      holder.append(canvas);
    }
    const values = spark ? spark.values : [];
    const ts = spark ? spark.timestamps : [];
    const points = values.map((v, i) => [ts[i], v]).filter((p) => p[1] !== null);
    holder.dataset.points = String(points.length);
    holder.setAttribute('title', points.length ? 'CPU over the range: ' + points.length + ' points, max ' + fmt(Math.max(...points.map((p) => p[1])), 'percent') : 'No CPU data in the range');
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, h);
    if (points.length < 1) return;
    const x = (t) => (range.to > range.from ? ((t - range.from) / (range.to - range.from)) * (w - 2) + 1 : w / 2);
    const y = (v) => h - 1 - (Math.min(100, Math.max(0, v)) / 100) * (h - 2);
    ctx.beginPath();
    points.forEach((p, i) => (i ? ctx.lineTo(x(p[0]), y(p[1])) : ctx.moveTo(x(p[0]), y(p[1]))));
    ctx.strokeStyle = cssVar('--accent');
    ctx.lineWidth = 1.25;
    ctx.stroke();
  }
  function renderHosts() {
    if (!hostStatus) return;
    // The page of a tenant without hosts has no list: once a first host has reported, the server draws it whole.
    if (!table) { if (hostStatus.hosts.length) location.reload(); return; }
    const needle = listState.q.trim().toLowerCase();
    const sign = listState.dir === 'asc' ? 1 : -1;
    const hosts = hostStatus.hosts
      .filter((h) => !needle || (h.hostname + ' ' + h.hostId + ' ' + h.platform).toLowerCase().includes(needle))
      .sort((a, b) => {
        const x = sortKey(a);
        const y = sortKey(b);
        if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
        return (x < y ? -sign : x > y ? sign : 0) || (a.hostId < b.hostId ? -1 : 1);
      });
    const q = new URLSearchParams(rangeParams(range)).toString();
    const rows = hosts.map((h) => {
      const iso = new Date(h.lastTs).toISOString();
      const spark = el('span', { class: 'spark', 'data-host-id': h.hostId });
      drawSpark(spark, sparkData.get(h.hostId));
      return el('tr', { class: 'host ' + h.status, 'data-host-id': h.hostId },
        el('th', { scope: 'row', 'data-label': 'Host' }, el('a', { class: 'hostname', href: '/hosts/' + encodeURIComponent(h.hostId) + '?' + q }, h.hostname),
          h.hostId !== h.hostname ? el('span', { class: 'host-id' }, h.hostId) : null),
        el('td', { 'data-label': 'Status' }, el('span', { class: 'status ' + h.status }, h.status)),
        el('td', { 'data-label': 'Platform' }, h.platform),
        el('td', { 'data-label': 'CPU', class: 'metric' }, ...gauge(h.cpuUsage, 'CPU usage'), spark),
        el('td', { 'data-label': 'Memory', class: 'metric' }, ...gauge(h.memoryPercent, 'Memory used')),
        el('td', { 'data-label': 'Disk', class: 'metric' }, ...gauge(h.diskPercent, 'Fullest filesystem used')),
        el('td', { 'data-label': 'Last report' }, el('time', { datetime: iso, title: utcTime(h.lastTs) + ' · ' + iso.slice(0, 10) }, relative(h.lastTs, hostStatus.now)),
          el('span', { class: 'absolute' }, absoluteUtc(h.lastTs))));
    });
    table.tBodies[0].replaceChildren(...rows);
    const total = document.querySelector('.counts .total');
    if (total) total.textContent = hostStatus.hosts.length + (hostStatus.hosts.length === 1 ? ' host' : ' hosts');
    for (const s of ['up', 'late', 'down']) {
      const c = document.querySelector('.count[data-status="' + s + '"] strong');
      if (c) c.textContent = String(hostStatus.counts[s]);
    }
    const asOf = document.querySelector('.as-of');
    if (asOf) asOf.textContent = 'as of ' + absoluteUtc(hostStatus.now);
    for (const th of table.tHead.rows[0].cells) {
      const a = th.querySelector('a[data-sort]');
      th.setAttribute('aria-sort', a.dataset.sort === listState.sort ? (listState.dir === 'asc' ? 'ascending' : 'descending') : 'none');
    }
  }
  if (kind === 'hosts' && table) {
    table.tHead.addEventListener('click', (ev) => {
      const a = ev.target.closest('a[data-sort]');
      if (!a) return;
      ev.preventDefault();
      const key = a.dataset.sort;
      listState.dir = listState.sort === key ? (listState.dir === 'asc' ? 'desc' : 'asc') : SORT_FIRST[key];
      listState.sort = key;
      const p = new URLSearchParams(location.search);
      p.set('sort', listState.sort); p.set('dir', listState.dir);
      history.replaceState(null, '', location.pathname + '?' + p.toString());
      renderHosts();
    });
    const filter = document.querySelector('form.filter');
    const input = filter.querySelector('input[type=search]');
    filter.querySelector('button').hidden = true;
    filter.addEventListener('submit', (ev) => ev.preventDefault());
    input.addEventListener('input', () => {
      listState.q = input.value;
      const p = new URLSearchParams(location.search);
      if (listState.q) p.set('q', listState.q); else p.delete('q');
      history.replaceState(null, '', location.pathname + '?' + p.toString());
      renderHosts();
    });
  }

  // ---- start ------------------------------------------------------------------------------------
  if (bar) showRange();
  load();
  if (kind === 'hosts') {
    // Statuses change with silence, not only with data: poll them every 10 s whatever the range.
    setInterval(() => { if (!document.hidden && !paused) load(); }, 10000);
  } else {
    restartRefresh();
  }
})();
