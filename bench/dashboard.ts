// Dashboard benchmark: headless Chromium navigates to the host page and the fleet page and waits until
// every chart is drawn; plus the JSON behind one chart. One tenant of the peers' generated fleet.
//
//   npm run bench -- dashboard [--hosts 100] [--days 30] [--runs 10] [--backend sqlite|postgres] [--data DIR] [--ranges 1h,24h,7d,30d]
//
// Data: ../shared/bench-peers/gen.mjs (seed 42), one tenant, 10 s reports, loaded in-process through
// MetricsStore.appendReports and then flushed (bench/fleet-loader.ts; the HTTP ingest path is measured by
// `npm run bench -- metrics`). With --data (SQLite only) the loaded database is kept in DIR and reused by later
// runs of the same size. Ranges are fixed (`?from=&to=`) and end at the data's end, so a reused data set is read
// exactly like a fresh one; the page does the same work for a fixed range as for the preset of the same length.
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { dropSchema } from './lib/postgres.js';
import { chromium, type Page } from 'playwright-core';
import { buildMetricsApp } from '../src/metrics/app.js';
import { loadMetricsConfig, type MetricsConfig } from '../src/metrics/config.js';
import { createMetricsDeps } from '../src/metrics/deps.js';
import { CHART_POINTS, seriesUrl } from '../src/metrics/dashboard/time-range.js';
import { issueToken } from '../src/metrics/domain/tenant-tokens.js';
import { loadFleet, prepareDir, reusable, type FleetSpec, type Manifest } from './fleet-loader.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// Beside the repository (../shared), or beside the worktrees' parent when run from a worktree.
const GEN = ['../../shared', '../../../shared'].map((p) => path.resolve(here, p, 'bench-peers/gen.mjs')).find(existsSync) ?? path.resolve(here, '../../shared/bench-peers/gen.mjs');
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const DAY = 86_400_000;

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      hosts: { type: 'string', default: '100' },
      days: { type: 'string', default: '30' },
      runs: { type: 'string', default: '10' },
      backend: { type: 'string', default: 'sqlite' },
      data: { type: 'string' },
      ranges: { type: 'string', default: '1h,24h,7d,30d' },
    },
  });
  const spec: FleetSpec = { hosts: Number(values.hosts), days: Number(values.days), seed: 42, tenantName: 'bench' };
  const runs = Number(values.runs);
  const backend = values.backend as 'sqlite' | 'postgres';
  if (values.data && backend !== 'sqlite') throw new Error('--data keeps a SQLite database; it does not apply to --backend postgres');
  const kept = values.data ? path.resolve(values.data) : undefined;
  const reuse = kept ? reusable(kept, spec) : undefined;
  if (kept && !reuse) prepareDir(kept);
  const dataDir = kept ?? mkdtempSync(path.join(os.tmpdir(), 'dashboard-bench-'));
  const schema = `bench_${Date.now()}`;
  const config: MetricsConfig = {
    ...loadMetricsConfig([], {}),
    logLevel: 'error', port: 0, dataDir,
    databaseUrl: backend === 'postgres' ? PG_URL : undefined,
    dbSchema: schema,
    // A kept data set is read again days later: nothing may expire meanwhile.
    retentionDays: spec.days + 365,
  };
  const deps = await createMetricsDeps(config);
  const app = await buildMetricsApp(config, deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'] });
  try {
    const tenant = await issueToken(deps.store, spec.tenantName);
    const data: Manifest = reuse ?? await loadFleet(GEN, deps.store, tenant.tenantId, spec, Date.now() - 5_000, kept,
      (done, total) => process.stderr.write(`loaded ${done.toLocaleString('en')} of ${total.toLocaleString('en')} reports\n`));
    const dbBytes = backend === 'sqlite' ? statSync(path.join(dataDir, 'metrics.db')).size : undefined;
    const hostId = (await deps.store.listHosts(tenant.tenantId))[0]!;

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${base}/signin`);
    await page.fill('#token', tenant.token);
    await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);

    const measurePage = async (url: string) => {
      const loads: PageLoad[] = [];
      for (let i = 0; i < runs + 2; i++) {
        const load = await loadPage(page, url);
        if (i >= 2) loads.push(load);
      }
      return loads;
    };
    // Requests are cheap next to page loads: more of them steady the percentiles on a shared machine.
    const jsonRuns = Math.max(20, 3 * runs);
    const measureJson = async (url: string) => {
      const times: number[] = [];
      for (let i = 0; i < jsonRuns + 2; i++) {
        const t0 = performance.now();
        const r = await fetch(url, { headers: { authorization: `Bearer ${tenant.token}` } });
        await r.arrayBuffer();
        if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
        if (i >= 2) times.push(performance.now() - t0);
      }
      return times;
    };
    const end = data.end;
    const pageRows: Array<[string, PageLoad[]]> = [];
    const jsonRows: Array<[string, number[]]> = [];
    // The page's presets that the data set covers, as fixed ranges ending at the data's end.
    const presets: Array<[string, number]> = [['1h', 3_600_000], ['24h', DAY], ['7d', 7 * DAY], ['30d', 30 * DAY]];
    const asked = values.ranges.split(',');
    for (const [range, ms] of presets.filter(([name, span]) => span <= spec.days * DAY && asked.includes(name))) {
      const fixed = `from=${end - ms}&to=${end}`;
      // The request the page makes for its charts (time-range.ts seriesUrl), and one chart's part of it.
      const series = seriesUrl(`${base}/api/v1/host/${hostId}`, { from: end - ms, to: end }, CHART_POINTS);
      const shown = series.slice(series.indexOf('?')).replace(/from=\d+&to=\d+&/, '');
      jsonRows.push([`${range}, every chart: \`/api/v1/host/:id${shown}\``, await measureJson(series)]);
      jsonRows.push([`${range}, the CPU chart: \`...&metrics=cpu.usage\``, await measureJson(`${series}&metrics=cpu.usage`)]);
      // Pages after the JSON: a fleet page's top-hosts pass leaves much garbage for the collector behind it.
      pageRows.push([`host page, ${range}`, await measurePage(`${base}/hosts/${hostId}?${fixed}`)]);
      pageRows.push([`fleet page, ${range}`, await measurePage(`${base}/fleet?${fixed}`)]);
    }
    const loadAvg = os.loadavg()[0]!;
    const loaded = reuse
      ? `reused from an earlier run's load (${data.loadSeconds.toFixed(0)} s of appendReports, then ${data.flushSeconds.toFixed(0)} s of flush)`
      : `loaded with appendReports in ${data.loadSeconds.toFixed(0)} s, then flushed (sealed and rolled up) in ${data.flushSeconds.toFixed(0)} s`;
    return [
      `Command: \`npm run bench -- dashboard --hosts ${spec.hosts} --days ${spec.days} --runs ${runs} --backend ${backend}${kept ? ' --data DIR' : ''}${values.ranges !== '1h,24h,7d,30d' ? ` --ranges ${values.ranges}` : ''}\`.`,
      '',
      `Data: one tenant of ${spec.hosts} hosts x ${spec.days} d of 10 s reports (${data.reports.toLocaleString('en')} reports, ${(data.reports * 28).toLocaleString('en')} samples) from the peers'`,
      `generator (seed ${spec.seed}), ${loaded}${dbBytes ? `; database ${(dbBytes / 2 ** 20).toFixed(0)} MiB` : ''}.`,
      `Ranges are fixed and end at the data's end. Headless Chromium (1280 x 900), signed in; each page`,
      `is loaded ${runs} times after 2 warm-ups. "Charts drawn" is the navigation start to the last uPlot draw of the page's first`,
      'load (read from `performance.now()` in the page); "whole page" to the end of the streamed HTML (its top lists or table of every metric).',
      'Requests: what the page fetched after its HTML (its static files come from the browser cache after the first load).',
      '',
      '| page, range | charts drawn p50 (ms) | p95 (ms) | whole page p50 (ms) | requests after the HTML (JSON KiB) |',
      '| --- | ---: | ---: | ---: | --- |',
      ...pageRows.map(([name, xs]) => {
        const drawn = xs.map((x) => x.drawn);
        const last = xs[xs.length - 1]!;
        return `| ${name} | ${quantile(drawn, 0.5).toFixed(0)} | ${quantile(drawn, 0.95).toFixed(0)} | ${quantile(xs.map((x) => x.whole), 0.5).toFixed(0)} | ${last.apiRequests} API (${(last.jsonBytes / 1024).toFixed(0)}), ${last.staticRequests} static |`;
      }),
      '',
      `The JSON behind the host page's charts, over HTTP from Node (${jsonRuns} requests after 2 warm-ups): the page's one request for every chart, and one chart's (its metric with min and max):`,
      '',
      '| request | p50 (ms) | p95 (ms) |',
      '| --- | ---: | ---: |',
      ...jsonRows.map(([name, xs]) => `| ${name} | ${quantile(xs, 0.5).toFixed(0)} | ${quantile(xs, 0.95).toFixed(0)} |`),
      '',
      `1-minute load average at the end: ${loadAvg.toFixed(1)} on ${os.cpus().length} cores (shared machine).`,
    ].join('\n');
  } finally {
    await browser.close();
    await app.close();
    await deps.close();
    if (!kept) rmSync(dataDir, { recursive: true, force: true });
    if (backend === 'postgres') await dropSchema(PG_URL, schema);
  }
}

interface PageLoad {
  /** Navigation start to the last chart drawn on the page's first load. */
  drawn: number;
  /** Navigation start to the end of the HTML (the streamed part included). */
  whole: number;
  /** Requests after the HTML: to the API (and the JSON bytes they read), and for static files. */
  apiRequests: number;
  jsonBytes: number;
  staticRequests: number;
}

/** One navigation, as the page itself measured it. */
async function loadPage(page: Page, url: string): Promise<PageLoad> {
  await page.goto(url);
  // Polled through page.evaluate: waitForFunction would eval inside the page, which its CSP forbids.
  const deadline = Date.now() + 120_000;
  const ready = "document.querySelector('main').dataset.loaded === '1' && [...document.querySelectorAll('figure.chart')].every((f) => f.dataset.drawnAt)";
  while (!(await page.evaluate(ready))) {
    if (Date.now() > deadline) throw new Error(`${url}: charts not drawn within 120 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return await page.evaluate(`(() => {
    const resources = performance.getEntriesByType('resource');
    return {
      drawn: Math.max(...[...document.querySelectorAll('figure.chart')].map((f) => Number(f.dataset.drawnAt))),
      whole: performance.getEntriesByType('navigation')[0].responseEnd,
      apiRequests: resources.filter((r) => r.name.includes('/api/')).length,
      jsonBytes: resources.filter((r) => r.name.includes('/api/')).reduce((n, r) => n + r.encodedBodySize, 0),
      staticRequests: resources.filter((r) => r.name.includes('/static/')).length,
    };
  })()`) as PageLoad;
}
