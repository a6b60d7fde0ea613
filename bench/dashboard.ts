// Dashboard benchmark: headless Chromium navigates to the host page and the fleet page and waits until
// every chart is drawn; plus the JSON behind one chart. One tenant of the peers' generated fleet.
//
//   npm run bench -- dashboard [--hosts 100] [--days 30] [--runs 10] [--backend sqlite|postgres]
//
// Data: ../shared/bench-peers/gen.mjs (seed 42), one tenant, 10 s reports ending now, loaded through
// MetricsStore.appendReports (the ingest path is measured by `npm run bench -- metrics`).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { chromium, type Page } from 'playwright-core';
import { buildMetricsApp } from '../src/metrics/app.js';
import { loadMetricsConfig, type MetricsConfig } from '../src/metrics/config.js';
import { createMetricsDeps } from '../src/metrics/deps.js';
import type { NewReport } from '../src/metrics/domain/metrics-store.js';
import { issueToken } from '../src/metrics/domain/tenant-tokens.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// Beside the repository (../shared), or beside the worktrees' parent when run from a worktree.
const GEN = ['../../shared', '../../../shared'].map((p) => path.resolve(here, p, 'bench-peers/gen.mjs')).find(existsSync) ?? path.resolve(here, '../../shared/bench-peers/gen.mjs');
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const DAY = 86_400_000;

interface Sample { h: { agentId: string; hostname: string }; ts: number; v: Float64Array }
interface Gen {
  METRIC_NAMES: string[];
  defaults(o: Record<string, unknown>): Record<string, unknown>;
  generate(o: Record<string, unknown>): Iterable<Sample[]>;
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      hosts: { type: 'string', default: '100' },
      days: { type: 'string', default: '30' },
      runs: { type: 'string', default: '10' },
      backend: { type: 'string', default: 'sqlite' },
    },
  });
  const hosts = Number(values.hosts);
  const days = Number(values.days);
  const runs = Number(values.runs);
  const backend = values.backend as 'sqlite' | 'postgres';
  const gen = (await import(pathToFileURL(GEN).href)) as Gen;

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dashboard-bench-'));
  const schema = `bench_${Date.now()}`;
  const config: MetricsConfig = {
    ...loadMetricsConfig([], {}),
    logLevel: 'error', port: 0, dataDir,
    databaseUrl: backend === 'postgres' ? PG_URL : undefined,
    dbSchema: schema,
    // Reports as old as the data set are kept.
    retentionDays: days + 1,
  };
  const deps = await createMetricsDeps(config);
  const app = await buildMetricsApp(config, deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'] });
  try {
    const tenant = await issueToken(deps.store, 'bench');
    const reports = days * 8640;
    const end = Date.now() - 5_000;
    const loadStart = performance.now();
    const opts = gen.defaults({ hosts, reports, tenants: 1, start: end - reports * 10_000, batch: 2_000 });
    for (const batch of gen.generate(opts)) {
      const rows: NewReport[] = batch.map((s) => ({
        tenantId: tenant.tenantId, hostId: s.h.agentId, hostname: s.h.hostname, platform: 'linux', ts: s.ts,
        metrics: new Map(gen.METRIC_NAMES.map((n, i) => [n, s.v[i]!])),
      }));
      await deps.store.appendReports(rows);
    }
    const loadSeconds = (performance.now() - loadStart) / 1000;
    const hostId = (await deps.store.listHosts(tenant.tenantId))[0]!;

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${base}/signin`);
    await page.fill('#token', tenant.token);
    await Promise.all([page.waitForURL(`${base}/`), page.click('button[type=submit]')]);

    const measurePage = async (url: string) => {
      const times: number[] = [];
      for (let i = 0; i < runs + 2; i++) {
        const t = await timeToCharts(page, url);
        if (i >= 2) times.push(t);
      }
      return times;
    };
    const measureJson = async (url: string) => {
      const times: number[] = [];
      for (let i = 0; i < runs + 2; i++) {
        const t0 = performance.now();
        const r = await fetch(url, { headers: { authorization: `Bearer ${tenant.token}` } });
        await r.arrayBuffer();
        if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
        if (i >= 2) times.push(performance.now() - t0);
      }
      return times;
    };
    const now = Date.now();
    const rows: Array<[string, number[]]> = [];
    // The page's presets that the data set covers.
    const presets: Array<[string, number]> = [['1h', 3_600_000], ['24h', DAY], ['7d', 7 * DAY], ['30d', 30 * DAY]];
    for (const [range, ms] of presets.filter(([, span]) => span <= days * DAY)) {
      rows.push([`host page, ${range}: navigation to all charts drawn`, await measurePage(`${base}/hosts/${hostId}?range=${range}`)]);
      rows.push([`fleet page, ${range}: navigation to all charts drawn`, await measurePage(`${base}/fleet?range=${range}`)]);
      // The request the page makes (dashboard.js seriesWindow): 1000 points up to 3 days, whole hours past that.
      const hour = 3_600_000;
      const q = ms < 72 * hour
        ? `from=${now - ms}&to=${now}&points=1000`
        : `from=${Math.floor((now - ms) / hour) * hour}&to=${Math.ceil((now + 1) / hour) * hour - 1}&points=${(Math.ceil((now + 1) / hour) - Math.floor((now - ms) / hour))}`;
      rows.push([`JSON for one host chart, ${range} (\`/api/v1/host/:id?${q.replace(/from=\d+&to=\d+&/, '')}&minmax=true\`)`, await measureJson(`${base}/api/v1/host/${hostId}?${q}&minmax=true`)]);
    }
    const loadAvg = os.loadavg()[0]!;
    return [
      `Command: \`npm run bench -- dashboard --hosts ${hosts} --days ${days} --runs ${runs} --backend ${backend}\`.`,
      '',
      `Data: one tenant of ${hosts} hosts x ${days} d of 10 s reports (${(hosts * reports).toLocaleString('en')} reports, 28 metrics each) from the peers'`,
      `generator, ending now, loaded with appendReports in ${loadSeconds.toFixed(0)} s. Headless Chromium (1280 x 900), signed in; each page`,
      `is loaded ${runs} times after 2 warm-ups. "All charts drawn" is the navigation start to the last uPlot draw of the page's first`,
      'load (read from `performance.now()` in the page). JSON: the request behind the host page\'s charts, over HTTP from Node.',
      '',
      '| measurement | p50 (ms) | p95 (ms) |',
      '| --- | ---: | ---: |',
      ...rows.map(([name, xs]) => `| ${name} | ${quantile(xs, 0.5).toFixed(0)} | ${quantile(xs, 0.95).toFixed(0)} |`),
      '',
      `1-minute load average at the end: ${loadAvg.toFixed(1)} on ${os.cpus().length} cores (shared machine).`,
    ].join('\n');
  } finally {
    await browser.close();
    await app.close();
    await deps.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (backend === 'postgres') {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try { await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`); } finally { await client.end(); }
    }
  }
}

/** Navigation start to the last chart draw of the page's first load, as the page itself measured it. */
async function timeToCharts(page: Page, url: string): Promise<number> {
  await page.goto(url);
  // Polled through page.evaluate: waitForFunction would eval inside the page, which its CSP forbids.
  const deadline = Date.now() + 120_000;
  const ready = "document.querySelector('main').dataset.loaded === '1' && [...document.querySelectorAll('figure.chart')].every((f) => f.dataset.drawnAt)";
  while (!(await page.evaluate(ready))) {
    if (Date.now() > deadline) throw new Error(`${url}: charts not drawn within 120 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Number(await page.evaluate("Math.max(...[...document.querySelectorAll('figure.chart')].map((f) => Number(f.dataset.drawnAt)))"));
}
