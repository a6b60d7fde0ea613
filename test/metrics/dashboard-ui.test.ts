import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { flattenReport } from '../../src/metrics/domain/flatten.js';
import { ReportMetrics } from '../../src/metrics/domain/report-shapes.js';
import type { Report } from '../../src/metrics/domain/report-schema.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';

/**
 * The monitoring UI in a real browser (Debian's chromium, as in
 * dashboard-browser.test.ts): statuses, sparklines, every chart of a host
 * with its data, time range presets, drag-zoom and links, alerts, the fleet
 * page, dark mode, a 390 px phone, JavaScript off, and tenant isolation
 * through the pages and the cookie-authorised API. With SCREENSHOTS=1
 * (`SCREENSHOTS=1 npm test -- test/metrics/dashboard-ui.test.ts`) screenshots
 * of each page go to test-output/screenshots/ (gitignored) for a person to
 * look at; they cost half a second each, so a plain run takes none.
 */
const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM_PATH);
if (!available && process.env['CHROMIUM_PATH']) throw new Error(`CHROMIUM_PATH=${CHROMIUM_PATH} does not exist`);
const LAUNCH_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const SHOTS = process.env['SCREENSHOTS'] === '1' ? path.join(process.cwd(), 'test-output', 'screenshots') : undefined;
if (SHOTS) mkdirSync(SHOTS, { recursive: true });
const HOSTILE = '<img src=x onerror=alert(1)>';
const STEP = 10_000;

/** A host's report at `ts`: counters grow steadily so their rates are known. */
function report(agentId: string, hostname: string, ts: number, i: number, extra: Partial<Report> & Record<string, unknown> = {}): Report {
  const wave = Math.sin(i / 12);
  // Reports accept extra numeric fields (temperature, swap, disk I/O counters): built as plain objects.
  const cpu: Report['cpu'] & Record<string, unknown> = { usage: 40 + 20 * wave, perCore: [30 + 10 * wave, 50, 45 + 5 * wave, 20], loadAverage: [1 + wave / 2, 0.9, 0.8], temperature: 55 + wave };
  const memory: Report['memory'] & Record<string, unknown> = { total: 8 * 2 ** 30, used: (4 + wave) * 2 ** 30, free: (4 - wave) * 2 ** 30, percent: (4 + wave) * 12.5, swapTotal: 2 * 2 ** 30, swapUsed: 2 ** 28 };
  const disks: (NonNullable<Report['disks']>[number] & Record<string, unknown>)[] = [
    { path: '/', total: 100 * 2 ** 30, used: 60 * 2 ** 30, available: 40 * 2 ** 30, percent: 60, readBytes: i * 5 * 2 ** 20, writeBytes: i * 2 * 2 ** 20 },
    { path: '/data', total: 1000 * 2 ** 30, used: 200 * 2 ** 30, available: 800 * 2 ** 30, percent: 20, readBytes: i * 2 ** 20, writeBytes: i * 2 ** 20 },
  ];
  return makeReport({
    agentId, hostname, ts,
    cpu, memory, disks,
    network: { eth0: { rxBytes: i * 1_000_000, txBytes: i * 250_000 } },
    ...extra,
  });
}

async function seed(h: MetricsHarness, tenantId: string, now: number): Promise<void> {
  const rows = [];
  for (let i = 0; i < 360; i++) {
    const ts = now - (360 - i) * STEP;
    rows.push(report('web-1', 'web-1.acme', ts, i));
    if (i < 300) rows.push(report('down-1', 'down-1.acme', ts, i, { cpu: { usage: 10 } }));
    if (i < 357) rows.push(report('late-1', HOSTILE, ts, i, { cpu: { usage: 80 }, platform: `Tom & Jerry's "OS"` }));
  }
  const stored = rows.map((r) => ({ tenantId, hostId: r.agentId, hostname: r.hostname, platform: r.platform, ts: r.ts, metrics: flattenReport(r) }));
  // The last reports one by one, as agents send them, so each host's interval is the gap between its last two.
  const tail = ['web-1', 'down-1', 'late-1'].flatMap((id) => stored.filter((r) => r.hostId === id).slice(-2));
  const outcomes = await h.deps.store.appendReports(stored.filter((r) => !tail.includes(r)));
  for (const r of tail) outcomes.push(await h.deps.store.appendReport(r));
  assert.ok(outcomes.every((o) => o.status === 'stored'));
}

async function newPage(context: BrowserContext, problems: string[]): Promise<Page> {
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${page.url()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`${page.url()}: ${e.message}`));
  page.on('dialog', (d) => { problems.push(`dialog: ${d.message()}`); void d.dismiss(); });
  return page;
}

/**
 * Polls an expression through page.evaluate (the DevTools protocol, which the
 * page's CSP does not govern): waitForFunction evaluates its predicate inside
 * the page, where `default-src 'self'` forbids eval.
 */
async function until(page: Page, expression: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Waits for the page's script to finish its n-th load. */
async function loaded(page: Page, atLeast = 1): Promise<void> {
  await until(page, `Number(document.querySelector('main').dataset.loaded || 0) >= ${atLeast}`);
}

async function chartsDrawn(page: Page): Promise<Record<string, { points: number; last: number; bands: number; lines: number }>> {
  await until(page, "document.querySelectorAll('figure.chart').length > 0 && [...document.querySelectorAll('figure.chart')].every((f) => Number(f.dataset.drawn) > 0)");
  return page.evaluate(`Object.fromEntries([...document.querySelectorAll('figure.chart')].map((f) => [f.dataset.chart, { points: Number(f.dataset.points), last: Number(f.dataset.last), bands: Number(f.dataset.bands), lines: Number(f.dataset.lines) }]))`);
}

/** A screenshot of `target` (a whole page unless `viewportOnly`) when SCREENSHOTS=1. */
async function shot(target: Page | Locator, name: string, viewportOnly = false): Promise<void> {
  if (!SHOTS) return;
  const file = path.join(SHOTS, `${name}.png`);
  await ('goto' in target ? target.screenshot({ path: file, fullPage: !viewportOnly }) : target.screenshot({ path: file }));
}

const queryOf = (page: Page) => new URL(page.url()).searchParams;
const queryOfUrl = (url: string) => new URL(url).searchParams;

test('the monitoring UI: statuses, sparklines, charts with data, range, zoom, alerts, fleet, dark, phone, no JavaScript, isolation', { skip: available ? false : `no chromium at ${CHROMIUM_PATH}` }, async (t) => {
  // The service's clock stays at the seeding time: statuses (late-1 is late, silent 40 s) hold however slowly the test runs.
  const now = Date.now();
  const h = await startMetrics('sqlite', { now: () => now });
  t.after(() => h.close());
  const acme = await h.newTenant('acme');
  const globex = await h.newTenant('globex');
  await seed(h, acme.tenantId, now);
  // One report through the real ingest carries an alert: it is stored and listed.
  const alerting = await ingest(h.url, acme.token, report('web-1', 'web-1.acme', now, 360, { alerts: [{ name: 'HighCpu', severity: 'critical', message: `CPU above 95% ${HOSTILE}`, value: 97 }] }));
  assert.equal(alerting.status, 200, alerting.text);
  assert.equal((await ingest(h.url, globex.token, report('b-secret', 'globex-db', now, 1, { alerts: [{ name: 'GlobexOnly', severity: 'warning' }] }))).status, 200);

  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: LAUNCH_ARGS });
  t.after(() => browser.close());
  const problems: string[] = [];
  const foreign: string[] = [];
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
  context.on('request', (r) => { if (!r.url().startsWith(h.url)) foreign.push(r.url()); });
  const page = await newPage(context, problems);

  // Sign in.
  await page.goto(`${h.url}/`);
  await page.fill('#token', acme.token);
  await Promise.all([page.waitForURL(`${h.url}/`), page.click('button[type=submit]')]);
  await loaded(page);

  // Host list: statuses from each host's own interval, counts, sparklines with the API's data.
  const status = (id: string) => page.locator(`tr[data-host-id="${id}"] .status`).innerText();
  assert.equal(await status('web-1'), 'up');
  assert.equal(await status('late-1'), 'late', 'silent for 4 intervals');
  assert.equal(await status('down-1'), 'down', 'silent for 10 minutes at a 10 s cadence');
  assert.equal(await page.locator('.count[data-status="down"] strong').innerText(), '1');
  assert.equal(await page.locator('.count[data-status="up"] strong').innerText(), '1');
  assert.ok((await page.locator('table.hosts').innerText()).includes(HOSTILE), 'agent text shown literally');
  await until(page, "Number(document.querySelector('.spark[data-host-id=\"web-1\"]')?.dataset.points) > 0");
  const sparks = await page.evaluate(`fetch('/api/v1/sparklines?metric=cpu.usage&points=60&from=${now - 3_600_000}&to=${now}').then((r) => r.json())`) as { hostId: string; values: (number | null)[] }[];
  const sparkPoints = Number(await page.locator('.spark[data-host-id="web-1"]').getAttribute('data-points'));
  assert.ok(Math.abs(sparkPoints - sparks.find((s) => s.hostId === 'web-1')!.values.filter((v) => v !== null).length) <= 1, 'the sparkline draws the API\'s points');
  assert.equal(await page.locator('.spark canvas').count(), 3);
  // Sorting and filtering without a reload.
  await page.click('th a[data-sort="cpu"]');
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-host-id'))), ['late-1', 'web-1', 'down-1']);
  assert.equal(queryOf(page).get('sort'), 'cpu');
  await page.fill('#host-filter', 'down');
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-host-id'))), ['down-1']);
  await page.fill('#host-filter', '');
  await shot(page, 'hosts-desktop-light');

  // Host page: every chart drawn with the API's data.
  const seriesResponse = page.waitForResponse((r) => r.url().includes('/api/v1/host/web-1?'));
  const seriesRequests: string[] = [];
  const countSeries = (r: { url(): string }) => { if (r.url().includes('/api/v1/host/web-1?')) seriesRequests.push(r.url()); };
  page.on('request', countSeries);
  await page.goto(`${h.url}/hosts/web-1?range=1h`);
  await loaded(page);
  const charts = await chartsDrawn(page);
  page.off('request', countSeries);
  // The head preloads the series request and the script's own fetch of it reuses that response: one request.
  const preload = new URL((await page.locator('link[rel=preload][as=fetch]').getAttribute('href'))!, h.url).href;
  assert.deepEqual(seriesRequests, [preload]);
  assert.deepEqual(Object.keys(charts).sort(), ['cpu', 'cpu-cores', 'disk-io', 'fs:/', 'fs:/data', 'load', 'memory', 'network', 'swap'].sort());
  const api = await (await seriesResponse).json() as { metrics: Record<string, (number | null)[]>; bucketMs: number | null };
  assert.equal(api.bucketMs, null, 'an hour of 10 s reports fits the page\'s point budget: raw reports');
  assert.equal(charts['cpu']!.points, api.metrics['cpu.usage']!.filter((v) => v !== null).length, 'CPU chart has every report');
  assert.ok(Math.abs(charts['cpu']!.last - api.metrics['cpu.usage']!.at(-1)!) < 1e-9, 'and ends on the latest value');
  assert.equal(charts['cpu']!.bands, 1, 'min-max band behind the CPU average');
  assert.equal(charts['cpu-cores']!.lines, 4);
  assert.equal(charts['load']!.lines, 3);
  assert.ok(Math.abs(charts['network']!.last - 100_000) < 1, 'rx counter shown as bytes/s (1 MB per 10 s)');
  assert.equal(await page.locator('figure[data-chart="network"] .u-legend').innerText().then((t) => /eth0 rx/.test(t)), true);
  assert.ok(Math.abs(charts['disk-io']!.last - (5 * 2 ** 20) / 10) < 1, 'disk read counter shown as bytes/s');
  for (const [id, c] of Object.entries(charts)) assert.ok(c.points > 300, `${id} drew ${c.points} points`);
  assert.match(await page.locator('figure[data-chart="memory"] .u-legend').innerText(), /GiB/, 'bytes formatted');
  assert.match(await page.locator('figure[data-chart="cpu"] .u-legend').innerText(), /%/);
  // Hover: the legend shows local time and UTC (the browser's zone is this machine's; UTC once when that is UTC).
  const over = page.locator('figure[data-chart="cpu"] .u-over');
  const box = (await over.boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const utcHere = new Date().getTimezoneOffset() === 0;
  assert.match(await page.locator('figure[data-chart="cpu"] .u-legend').innerText(), utcHere ? /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/ : /\d\d:\d\d:\d\d · \d\d:\d\d:\d\d UTC/);
  // The alert that arrived in a report, escaped.
  const alertsText = await page.locator('.alerts-list').innerText();
  assert.match(alertsText, /HighCpu/);
  assert.match(alertsText, /firing/);
  assert.ok(alertsText.includes(HOSTILE));
  // Any other metric opens a chart from the list.
  await page.click('a[data-metric="cpu.temperature"]');
  await page.waitForSelector('figure[data-chart="metric:cpu.temperature"]');
  assert.equal(queryOf(page).get('metric'), 'cpu.temperature');
  assert.ok((await chartsDrawn(page))['metric:cpu.temperature']!.points > 300);
  await shot(page, 'host-desktop-light');

  // A preset changes the range and the URL.
  const before = Number(await page.evaluate("document.querySelector('main').dataset.loaded"));
  const sixHours = page.waitForRequest((r) => r.url().includes('/api/v1/host/web-1?') && Number(new URL(r.url()).searchParams.get('to')) - Number(new URL(r.url()).searchParams.get('from')) === 6 * 3_600_000);
  const headerRefresh = page.waitForResponse((r) => r.url().endsWith('/api/v1/hosts/status'));
  await page.click('a[data-range="6h"]');
  await sixHours;
  await loaded(page, before + 1);
  const fresh = await (await headerRefresh).json() as { hosts: { hostId: string; status: string }[] };
  const expected = fresh.hosts.find((x) => x.hostId === 'web-1')!.status;
  assert.equal(await page.locator('.page-head .status').innerText(), expected, 'the header follows the host\'s status');
  assert.equal(await page.locator('.page-head .status').getAttribute('class'), `status ${expected}`);
  assert.match(await page.locator('.page-head .last-report').innerText(), /ago|just now/);
  assert.equal(queryOf(page).get('range'), '6h');
  const metricLink = new URL((await page.locator('a[data-metric="cpu.temperature"]').getAttribute('href'))!, h.url);
  assert.equal(metricLink.searchParams.get('range'), '6h', 'a metric link opened in a new tab keeps the range the table was drawn for');
  assert.equal(await page.locator('a[data-range="6h"]').getAttribute('aria-current'), 'true');

  // A long range asks for whole hours at one point per hour (the storage's hourly rollups).
  const weekRequest = page.waitForRequest((r) => r.url().includes('/api/v1/host/web-1?') && queryOfUrl(r.url()).get('points') !== '1000');
  await page.click('a[data-range="7d"]');
  const week = queryOfUrl((await weekRequest).url());
  const [wFrom, wTo, wPoints] = ['from', 'to', 'points'].map((k) => Number(week.get(k)));
  assert.equal(wFrom! % 3_600_000, 0);
  assert.equal((wTo! + 1) % 3_600_000, 0);
  assert.equal(wPoints, (wTo! + 1 - wFrom!) / 3_600_000);
  assert.ok(wPoints! >= 168 && wPoints! <= 169);
  await until(page, "new URL(location.href).searchParams.get('range') === '7d'");
  await chartsDrawn(page);
  await page.click('a[data-range="6h"]');
  await until(page, "new URL(location.href).searchParams.get('range') === '6h'");

  // Drag-zoom on a chart: a fixed window in the URL, and the charts follow it.
  const zoomed = page.waitForRequest((r) => r.url().includes('/api/v1/host/web-1?') && new URL(r.url()).searchParams.get('from') !== null && !r.url().includes('points=1&'));
  const plot = (await page.locator('figure[data-chart="cpu"] .u-over').boundingBox())!;
  await page.mouse.move(plot.x + plot.width * 0.6, plot.y + 20);
  await page.mouse.down();
  await page.mouse.move(plot.x + plot.width * 0.8, plot.y + 20, { steps: 5 });
  await page.mouse.up();
  await zoomed;
  await until(page, "new URL(location.href).searchParams.has('from')");
  const from = Number(queryOf(page).get('from'));
  const to = Number(queryOf(page).get('to'));
  assert.equal(queryOf(page).get('range'), null);
  assert.ok(to > from && to - from < 6 * 3_600_000 * 0.3, `zoomed to ${to - from} ms`);
  assert.match(await page.locator('.range-text').innerText(), /local time/);

  // A link to that range restores it.
  const link = page.url();
  const again = await newPage(context, problems);
  const restored = again.waitForRequest((r) => r.url().includes(`/api/v1/host/web-1?from=${from}&to=${to}`));
  await again.goto(link);
  await restored;
  await loaded(again);
  assert.equal(await again.locator('.range-bar').getAttribute('data-from'), String(from));
  assert.equal(await again.locator('a[data-range][aria-current]').count(), 0, 'no preset is current for a fixed window');
  // A custom range, typed in the viewer's local time.
  const start = new Date(now - 40 * 60_000);
  const local = (d: Date) => `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}T${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
  const end = new Date(now - 10 * 60_000);
  await again.fill('.custom-range input[name=from]', local(start));
  await again.fill('.custom-range input[name=to]', local(end));
  const customRequest = again.waitForRequest((r) => r.url().includes('/api/v1/host/web-1?'));
  await again.click('.custom-range button[type=submit]');
  const sent = new URL((await customRequest).url()).searchParams;
  const minute = (d: Date) => Math.floor(d.getTime() / 60_000) * 60_000;
  assert.equal(Number(sent.get('from')), minute(start));
  assert.equal(Number(sent.get('to')), minute(end));
  assert.equal(queryOf(again).get('from'), String(minute(start)), 'the custom range is in the URL');
  await again.close();

  // Fleet page: aggregate charts, top 10 lists, every host's alerts; nothing of the other tenant.
  const aggregateResponse = page.waitForResponse((r) => r.url().includes('/api/v1/aggregate?'));
  await page.goto(`${h.url}/fleet?range=1h`);
  await loaded(page);
  const fleetCharts = await chartsDrawn(page);
  assert.ok(['cpu', 'memory', 'load'].every((id) => fleetCharts[id]!.points > 100), JSON.stringify(fleetCharts));
  assert.ok(!('network' in fleetCharts) && !('disk-io' in fleetCharts), 'counters are charted per host only: a fleet average of raw counters is no rate');
  assert.equal(fleetCharts['cpu']!.bands, 1, 'the fleet\'s spread behind its average');
  // The buckets after late-1's last report (only web-1 has reported in them yet) are left out: no dip at the right edge.
  const aggregate = await (await aggregateResponse).json() as { timestamps: number[]; metrics: Record<string, (number | null)[]> };
  const lateLast = now - 4 * STEP;
  assert.equal(Number(await page.evaluate("document.querySelector('main').dataset.reportedUntil")), lateLast, 'late-1 (late, not down) has reported up to here');
  const reported = aggregate.timestamps.filter((ts) => ts <= lateLast).length;
  assert.ok(reported < aggregate.timestamps.length, 'the answer holds buckets after late-1\'s last report');
  assert.equal(fleetCharts['cpu']!.points, reported, 'the chart stops at the last bucket every host that is not down reported in');
  assert.equal(fleetCharts['cpu']!.last, aggregate.metrics['cpu.usage']![reported - 1]);
  const topCpu = await page.locator('.top[data-top="cpu"] li').allInnerTexts();
  assert.equal(topCpu.length, 3);
  assert.ok(topCpu[0]!.includes(HOSTILE), 'the 80 % host leads, its name as text');
  assert.match(await page.locator('.top[data-top="disk"]').innerText(), /web-1\.acme \/\s+60\.0 %/, 'the fullest filesystem, named');
  const fleetAlerts = await page.locator('.alerts-list').innerText();
  assert.match(fleetAlerts, /HighCpu/);
  assert.doesNotMatch(await page.content(), /GlobexOnly|b-secret|globex-db/);
  await shot(page, 'fleet-desktop-light');
  // A refresh (here a preset) reads the three top lists in one request.
  const lists = page.waitForResponse((r) => r.url().includes('/api/v1/top/lists?'));
  let topRequests = 0;
  const countTop = (r: { url(): string }) => { if (/\/api\/v1\/top[?/]/.test(r.url())) topRequests++; };
  page.on('request', countTop);
  await page.click('a[data-range="6h"]');
  assert.deepEqual(Object.keys((await (await lists).json() as { lists: object }).lists), ['cpu.usage', 'memory.percent', 'disk']);
  await until(page, "document.querySelectorAll('.top[data-top=\"cpu\"] li').length === 3 && new URL(location.href).searchParams.get('range') === '6h'");
  page.off('request', countTop);
  assert.equal(topRequests, 1);
  assert.ok((await page.locator('.top[data-top="cpu"] li').first().innerText()).includes(HOSTILE), 'lists rendered again, names as text');

  // Tenant isolation through the pages and the cookie-authorised API.
  const isolation = await page.evaluate(`(async () => {
    const get = async (p) => { const r = await fetch(p); return [r.status, await r.text()]; };
    const post = await fetch('/api/v1/ingest', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    return { host: await get('/api/v1/host/b-secret'), page: await get('/hosts/b-secret'), alerts: await get('/api/v1/alerts?host=b-secret'),
      all: await get('/api/v1/alerts'), top: await get('/api/v1/top?metric=cpu.usage'), status: await get('/api/v1/hosts/status'), post: post.status };
  })()`) as Record<'host' | 'page' | 'alerts' | 'all' | 'top' | 'status', [number, string]> & { post: number };
  assert.equal(isolation.host[0], 404);
  assert.equal(isolation.page[0], 404);
  assert.deepEqual(JSON.parse(isolation.alerts[1]), []);
  for (const k of ['all', 'top', 'status'] as const) {
    assert.equal(isolation[k][0], 200);
    assert.doesNotMatch(isolation[k][1], /b-secret|globex|GlobexOnly/, k);
  }
  assert.equal(isolation.post, 401, 'the cookie cannot write');
  problems.splice(0, problems.length, ...problems.filter((p) => !/status of 40[14]/.test(p)));

  // Dark mode follows the system.
  await page.emulateMedia({ colorScheme: 'dark' });
  const bg = await page.evaluate("getComputedStyle(document.body).backgroundColor");
  assert.equal(bg, 'rgb(20, 23, 28)');
  await page.waitForTimeout(200);
  await shot(page, 'fleet-desktop-dark');
  for (const [url, name] of [[`${h.url}/`, 'hosts'], [`${h.url}/hosts/web-1?range=1h`, 'host']] as const) {
    await page.goto(url);
    await loaded(page);
    if (name === 'host') await chartsDrawn(page);
    await shot(page, `${name}-desktop-dark`);
  }
  await page.close();

  // A 390 px phone, light and dark: nothing wider than the screen.
  for (const scheme of ['light', 'dark'] as const) {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, colorScheme: scheme });
    const p = await newPage(phone, problems);
    await p.goto(`${h.url}/signin`);
    await p.fill('#token', acme.token);
    await Promise.all([p.waitForURL(`${h.url}/`), p.click('button[type=submit]')]);
    for (const [url, name] of [[`${h.url}/`, 'hosts'], [`${h.url}/hosts/web-1?range=1h`, 'host'], [`${h.url}/fleet?range=1h`, 'fleet']] as const) {
      await p.goto(url);
      await loaded(p);
      if (name !== 'hosts') await chartsDrawn(p);
      const width = await p.evaluate('document.documentElement.scrollWidth');
      assert.ok(Number(width) <= 390, `${name} is ${String(width)} px wide at 390 px`);
      if (name === 'hosts') {
        // A down host's whole card is tinted (its odd last row included), not its cells.
        const tint = await p.evaluate(`(() => { const bg = (e) => getComputedStyle(e).backgroundColor; const down = document.querySelector('tr[data-host-id="down-1"]');
          return { down: bg(down), up: bg(document.querySelector('tr[data-host-id="web-1"]')), cells: [...down.children].map(bg) }; })()`) as { down: string; up: string; cells: string[] };
        assert.notEqual(tint.down, tint.up, `the down card is tinted (${scheme})`);
        assert.ok(tint.cells.every((c) => c === 'rgba(0, 0, 0, 0)'), `its cells are not tinted on their own: ${tint.cells.join(', ')}`);
      }
      await shot(p, `${name}-390-${scheme}`);
      await shot(p, `${name}-390-${scheme}-top`, true);
      if (name === 'host') await shot(p.locator('figure[data-chart="network"]'), `network-390-${scheme}`);
    }
    await phone.close();
  }

  // Without JavaScript every page is still a plain table.
  const plain = await browser.newContext({ javaScriptEnabled: false });
  const np = await newPage(plain, problems);
  await np.goto(`${h.url}/signin`);
  await np.fill('#token', acme.token);
  await Promise.all([np.waitForURL(`${h.url}/`), np.click('button[type=submit]')]);
  assert.equal(await np.locator('table.hosts tbody tr').count(), 3);
  assert.equal(await np.locator('tr[data-host-id="down-1"] .status').innerText(), 'down');
  await np.goto(`${h.url}/hosts/web-1?range=1h`);
  assert.ok(await np.locator('table.metrics tbody tr').count() > 20, 'every metric with mean, min and max');
  assert.match(await np.locator('.alerts-list').innerText(), /HighCpu/);
  await shot(np, 'host-nojs');
  await plain.close();

  // Live updates: a host's first report appears on an open host list without a reload.
  const live = await newPage(context, problems);
  // The page's clock runs as the real one until the test moves it on past the 10 s poll.
  await live.clock.install();
  await live.goto(`${h.url}/`);
  await loaded(live);
  await live.evaluate("document.body.dataset.marker = 'same document'");
  assert.equal((await ingest(h.url, acme.token, report('new-1', 'new-1.acme', Date.now(), 0))).status, 200);
  await live.clock.fastForward(10_000);
  await until(live, "document.querySelector('tr[data-host-id=\"new-1\"] .status')?.textContent === 'up'");
  assert.equal(await live.evaluate('document.body.dataset.marker'), 'same document', 'no reload happened');
  await live.close();

  assert.deepEqual(problems, [], 'no console error, CSP violation or dialog');
  assert.deepEqual(foreign, [], 'nothing loaded from another origin');
});

test('under a --series-points-max below the charts\' 1000 points and the sparklines\' 60, every request the pages make is answered and the charts draw', { skip: available ? false : `no chromium at ${CHROMIUM_PATH}` }, async (t) => {
  const now = Date.now();
  const h = await startMetrics('sqlite', { now: () => now, seriesPoints: 40, seriesPointsMax: 40 });
  t.after(() => h.close());
  const acme = await h.newTenant('acme');
  await seed(h, acme.tenantId, now);
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: LAUNCH_ARGS });
  t.after(() => browser.close());
  const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${acme.token}` } });
  const refused: string[] = [];
  const asked: number[] = [];
  context.on('response', (r) => {
    const points = new URL(r.url()).searchParams.get('points');
    if (points !== null) asked.push(Number(points));
    if (r.status() >= 400) refused.push(`${r.status()} ${r.url()}`);
  });
  const problems: string[] = [];
  const page = await newPage(context, problems);
  await page.goto(`${h.url}/`);
  await until(page, "Number(document.querySelector('.spark[data-host-id=\"web-1\"]')?.dataset.points) > 0");
  for (const path of ['/hosts/web-1', '/hosts/web-1?range=30d', '/fleet', '/fleet?range=30d']) {
    await page.goto(`${h.url}${path}`);
    await loaded(page);
    assert.ok(Object.values(await chartsDrawn(page)).some((c) => c.points > 0), path);
  }
  assert.deepEqual(refused, []);
  assert.ok(asked.length > 0 && asked.every((p) => p <= 40), JSON.stringify(asked));
  assert.deepEqual(problems, [], 'no console error');
});

test('the dashboard under odd data and ranges: a lone report, a host gone quiet, exact table means, years-long and junk ranges, thousands of names, UTC times, sorting on a phone', { skip: available ? false : `no chromium at ${CHROMIUM_PATH}` }, async (t) => {
  const now = Date.now();
  const h = await startMetrics('sqlite', { now: () => now });
  t.after(() => h.close());
  const acme = await h.newTenant('acme');
  const wide = await h.newTenant('wide');
  const metricsOf = (o: Record<string, number>) => new ReportMetrics(Object.keys(o), Float64Array.from(Object.values(o)));
  const at = (hostId: string, ts: number, cpu: number) => ({ tenantId: acme.tenantId, hostId, hostname: hostId, platform: 'linux', ts, metrics: metricsOf({ 'cpu.usage': cpu }) });
  const rows = [at('lonely', now - 20 * 60_000, 42)];
  // burst: 10 s reports at 10 % for 5 h 50 min, then 1 s reports at 90 % for 10 min. The exact 6 h mean is
  // (2100 x 10 + 600 x 90) / 2700 = 27.8 %; the mean of the chart's ~22 s buckets would be about 12 %.
  for (let ts = now - 6 * 3_600_000 + 10_000; ts <= now - 600_000; ts += 10_000) rows.push(at('burst', ts, 10));
  for (let ts = now - 600_000 + 1000; ts <= now; ts += 1000) rows.push(at('burst', ts, 90));
  // quiet: reported for 40 s, 5 min ago.
  for (let i = 0; i < 5; i++) rows.push(at('quiet', now - 300_000 - i * 10_000, 50));
  assert.ok((await h.deps.store.appendReports(rows)).every((o) => o.status === 'stored'));
  // wide: 3 hosts of 900 names each (450 interfaces), 2,701 names in all: 1000 points of every name would pass the
  // 2,000,000 values one aggregate answer holds.
  const wideRows = [];
  for (let host = 0; host < 3; host++) {
    for (let i = 0; i < 6; i++) {
      const metrics: Record<string, number> = { 'cpu.usage': 20 + host };
      for (let n = 0; n < 450; n++) { metrics[`network.h${host}n${n}.rxBytes`] = i * 1000; metrics[`network.h${host}n${n}.txBytes`] = i * 500; }
      wideRows.push({ tenantId: wide.tenantId, hostId: `w-${host}`, hostname: `w-${host}`, platform: 'linux', ts: now - (6 - i) * 10_000, metrics: metricsOf(metrics) });
    }
  }
  assert.ok((await h.deps.store.appendReports(wideRows)).every((o) => o.status === 'stored'));

  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: LAUNCH_ARGS });
  t.after(() => browser.close());
  const problems: string[] = [];
  const signedIn = async (token: string, options: Parameters<Browser['newContext']>[0] = {}) => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light', timezoneId: 'America/New_York', ...options });
    const page = await newPage(context, problems);
    await page.goto(`${h.url}/signin`);
    await page.fill('#token', token);
    await Promise.all([page.waitForURL(`${h.url}/`), page.click('button[type=submit]')]);
    await loaded(page);
    return { context, page };
  };
  const { context, page } = await signedIn(acme.token);
  const span = (chart: string) => page.evaluate(`(() => { const f = document.querySelector('figure[data-chart="${chart}"]'); return [Number(f.dataset.from), Number(f.dataset.to), Number(f.dataset.points)]; })()`) as Promise<[number, number, number]>;

  // Times in the host list stay in UTC, labelled, after the script's updates (the viewer is in New York).
  await loaded(page, 2);
  for (const text of await page.locator('table.hosts .absolute').allInnerTexts()) assert.match(text, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  assert.match(await page.locator('.as-of').innerText(), /UTC$/);

  // A lone report draws on a chart spanning the whole hour; a host gone quiet shows its silence up to now.
  await page.goto(`${h.url}/hosts/lonely?range=1h`);
  await chartsDrawn(page);
  const [from, to, points] = await span('cpu');
  assert.equal(points, 1);
  assert.ok(to - from === 3_600_000 && Math.abs(to - now) < 60_000, `the chart spans the hour: ${from}..${to}`);
  await shot(page.locator('figure[data-chart="cpu"]'), 'lone-report');
  // The viewer is in New York: the hover legend shows its local time and UTC.
  const plot = (await page.locator('figure[data-chart="cpu"] .u-over').boundingBox())!;
  await page.mouse.move(plot.x + plot.width / 2, plot.y + plot.height / 2);
  assert.match(await page.locator('figure[data-chart="cpu"] .u-legend').innerText(), /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d · \d\d:\d\d:\d\d UTC/);
  await page.goto(`${h.url}/hosts/quiet?range=15m`);
  await chartsDrawn(page);
  assert.equal((await span('cpu'))[1] - (await span('cpu'))[0], 15 * 60_000);

  // The table's means are the range's own, before and after the script refreshes it.
  await page.goto(`${h.url}/hosts/burst?range=6h`);
  await loaded(page);
  const mean = () => page.locator('table.metrics tr:has(a[data-metric="cpu.usage"]) td[data-label="Mean"]').innerText();
  assert.equal(await mean(), '27.8 %', 'rendered by the server');
  const summaries: string[] = [];
  page.on('request', (r) => { if (r.url().includes('/api/v1/host/burst?') && r.url().includes('points=1&')) summaries.push(r.url()); });
  await page.click('a[data-range="6h"]');
  await loaded(page, 2);
  assert.ok(summaries.length >= 1, 'the refresh reads the range as one point');
  assert.equal(await mean(), '27.8 %', 'and keeps the exact mean');

  // A range of two years: a point per whole number of hours, within the chart's budget, and the charts draw.
  for (const pagePath of ['/hosts/burst', '/fleet']) {
    const asked = page.waitForRequest((r) => /\/api\/v1\/(host|aggregate)/.test(r.url()) && r.url().includes('minmax=true'));
    await page.goto(`${h.url}${pagePath}?from=${now - 2 * 365 * 86_400_000}&to=${now}`);
    const q = new URL((await asked).url()).searchParams;
    assert.ok(Number(q.get('points')) <= 1000 && (Number(q.get('to')) + 1 - Number(q.get('from'))) % (Number(q.get('points')) * 3_600_000) === 0, q.toString());
    await chartsDrawn(page);
    assert.equal(await page.locator('.notice').isHidden(), true, `${pagePath}: no error notice`);
  }
  // A range the server cannot read falls back to the last hour in the browser too.
  await page.goto(`${h.url}/hosts/burst?from=1&to=99999999999999999`);
  await chartsDrawn(page);
  assert.equal(await page.locator('.range-text').innerText(), 'Last 1 h, ending now');
  assert.equal(await page.locator('.notice').isHidden(), true);
  await context.close();

  // A tenant with thousands of metric names still gets its fleet charts (fewer points, not a 422).
  const w = await signedIn(wide.token);
  await w.page.goto(`${h.url}/fleet?range=24h`);
  await loaded(w.page);
  const budget = Number(await w.page.evaluate("document.querySelector('main').dataset.maxPoints"));
  assert.equal(budget, Math.floor(2_000_000 / 2701));
  const charts = await chartsDrawn(w.page);
  assert.ok(charts['cpu'] && charts['cpu'].points > 0, JSON.stringify(charts));
  assert.equal(await w.page.locator('.notice').isHidden(), true);
  await w.context.close();

  // On a phone the host list is cards, and still sorts: its sort links stay, above them.
  const phone = await signedIn(acme.token, { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
  const sorts = phone.page.locator('table.hosts thead a[data-sort]');
  assert.equal(await sorts.count(), 7);
  for (let i = 0; i < 7; i++) assert.ok(await sorts.nth(i).isVisible(), `sort link ${i} visible`);
  await phone.page.click('table.hosts thead a[data-sort="cpu"]');
  await until(phone.page, "document.querySelector('table.hosts tbody tr').dataset.hostId === 'burst'");
  await shot(phone.page, 'hosts-390-sort', true);
  await phone.context.close();

  assert.deepEqual(problems, [], 'no console error, CSP violation or dialog');
});

test('a chart read the network holds without an answer fails after 30 s instead of stopping every refresh after it; the next load draws', { skip: available ? false : `no chromium at ${CHROMIUM_PATH}`, timeout: 60_000 }, async (t) => {
  const now = Date.now();
  const h = await startMetrics('sqlite', { now: () => now });
  t.after(() => h.close());
  const tenant = await h.newTenant('acme');
  for (let i = 0; i < 30; i++) assert.equal((await ingest(h.url, tenant.token, makeReport({ agentId: 'web-1', hostname: 'web-1', ts: now - i * 60_000 }))).status, 200);
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: LAUNCH_ARGS });
  t.after(() => browser.close());
  const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${tenant.token}` } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  // The page's timers run on a clock the test moves; the network is real.
  await page.clock.install({ time: now });
  let seriesRequests = 0;
  await page.route(/\/api\/v1\/host\/web-1\?/, async (route) => {
    // The first series read (the page's preload) gets no answer, ever: a link gone silent.
    if (++seriesRequests === 1) return;
    await route.continue();
  });
  await page.goto(`${h.url}/hosts/web-1`);
  await until(page, 'document.querySelector("main") !== null');
  const loads = () => page.evaluate('Number(document.querySelector("main").dataset.loaded || 0)') as Promise<number>;
  await page.clock.runFor(5_000);
  assert.equal(await loads(), 0, 'the held read holds the first load');
  assert.equal(seriesRequests, 1);
  // 30 s on, the read is given up and a load asks again (its own retry or the next refresh): this one is answered.
  await page.clock.runFor(26_000);
  await loaded(page);
  assert.ok(seriesRequests >= 2, `${seriesRequests} series reads`);
  assert.equal(await page.locator('.notice').isHidden(), true, 'the notice of the failed read is gone once a load succeeds');
});
