import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapeHtml, html } from '../../src/metrics/dashboard/html-template.js';
import { formatAbsolute, formatPercent, formatRelative } from '../../src/metrics/dashboard/format.js';
import { ROWS_PER_PIECE, dashboardPieces, parseHostListQuery, renderDashboard, sortAndFilter, type DashboardView } from '../../src/metrics/dashboard/dashboard-page.js';
import { CHART_POINTS, parseTimeRange, rangeQuery, seriesUrl, seriesWindow } from '../../src/metrics/dashboard/time-range.js';
import { hostStatus, reportedUntil, withStatus, type HostWithStatus } from '../../src/metrics/domain/host-status.js';
import type { HostLatest } from '../../src/metrics/domain/metrics-store.js';
import { renderSignIn } from '../../src/metrics/dashboard/signin-page.js';
import { fleetPageParts, fleetPageRest } from '../../src/metrics/dashboard/fleet-page.js';
import { hostPageParts } from '../../src/metrics/dashboard/host-page.js';
import { loadStaticAssets } from '../../src/metrics/dashboard/static-assets.js';

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const HOSTILE = '<img src=x onerror=alert(1)>';

function host(over: Partial<HostLatest> = {}): HostLatest {
  return { hostId: 'web-1', hostname: 'web-1', platform: 'linux', lastTs: NOW - 12_000, cpuUsage: 42.25, memoryPercent: 61.04, diskPercent: 55, intervalMs: 10_000, ...over };
}

function render(hosts: HostLatest[], over: Partial<DashboardView> = {}): string {
  const withS = withStatus(hosts, NOW);
  return renderDashboard({
    tenantName: 'acme', now: NOW, session: false, hosts: withS.hosts as HostWithStatus[], counts: withS.counts,
    range: parseTimeRange({}, NOW), list: parseHostListQuery({}), maxPoints: 10_000, ...over,
  });
}

test('a long host list comes in pieces of rows, which joined are the page, every row once, in order, escaped', () => {
  const hosts = Array.from({ length: 2 * ROWS_PER_PIECE + 3 }, (_, i) => host({ hostId: `h-${String(i).padStart(4, '0')}`, hostname: `h-${String(i).padStart(4, '0')}${i === 7 ? HOSTILE : ''}` }));
  const withS = withStatus(hosts, NOW);
  const view: DashboardView = {
    tenantName: 'acme', now: NOW, session: false, hosts: withS.hosts as HostWithStatus[], counts: withS.counts,
    range: parseTimeRange({}, NOW), list: parseHostListQuery({ sort: 'name', dir: 'asc' }), maxPoints: 10_000,
  };
  const pieces = [...dashboardPieces(view)];
  assert.equal(pieces.length, 1 + 3 + 1, 'the head, three pieces of rows, the rest');
  const page = pieces.join('');
  assert.equal(page, renderDashboard(view));
  const ids = [...page.matchAll(/<tr class="host [a-z]+" data-host-id="([^"]+)"/g)].map((m) => m[1]);
  assert.deepEqual(ids, hosts.map((h) => h.hostId));
  assert.ok(!page.includes('<!--rows-->'));
  assert.ok(!page.includes('<img'));
  assert.match(page, /<\/tbody>\n<\/table>[\s\S]*<\/html>\n$/);
  assert.deepEqual([...dashboardPieces({ ...view, hosts: [] })].length, 1, 'no host: one piece');
});

test('escapeHtml neutralises every character that can open markup or close an attribute', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&amp;</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;');
});

test('html escapes interpolations, keeps nested templates, joins arrays and drops null', () => {
  const inner = html`<b>${'<i>'}</b>`;
  assert.equal(html`<p title="${'"x"'}">${inner}${['a', '&']}${null}${undefined}${3}</p>`.value, '<p title="&quot;x&quot;"><b>&lt;i&gt;</b>a&amp;3</p>');
});

test('formatRelative covers seconds to days and a ts ahead of the server clock', () => {
  assert.equal(formatRelative(NOW - 2_000, NOW), 'just now');
  assert.equal(formatRelative(NOW - 42_000, NOW), '42 s ago');
  assert.equal(formatRelative(NOW - 5 * 60_000 - 1, NOW), '5 min ago');
  assert.equal(formatRelative(NOW - 3 * 3_600_000, NOW), '3 h ago');
  assert.equal(formatRelative(NOW - 2 * 86_400_000, NOW), '2 d ago');
  assert.equal(formatRelative(NOW + 30_000, NOW), 'in 30 s');
  assert.equal(formatAbsolute(NOW - 12_000), '2026-11-21 11:59:48 UTC');
  assert.equal(formatPercent(42.25), '42.3 %');
  assert.equal(formatPercent(null), '—');
});

test('the dashboard lists every host with status, CPU, memory, disk and last report, relative and absolute', () => {
  const page = render([host(), host({ hostId: 'db-1', hostname: 'db-1', platform: 'freebsd', cpuUsage: null, memoryPercent: 99.5, lastTs: NOW - 3_600_000 })], { session: true });
  assert.match(page, /^<!doctype html>/);
  assert.match(page, /<span class="total">2 hosts<\/span>: <span class="count up" data-status="up"><strong>1<\/strong> up<\/span> · <span class="count late" data-status="late"><strong>0<\/strong> late<\/span> · <span class="count down" data-status="down"><strong>1<\/strong> down/);
  assert.match(page, /<a class="hostname" href="\/hosts\/web-1\?range=1h">web-1<\/a>/);
  assert.match(page, /<meter [^>]*value="42\.3"[^>]*>42\.3 %<\/meter>/);
  assert.match(page, /61\.0 %/);
  assert.match(page, /55\.0 %/, 'the fullest disk');
  assert.match(page, /12 s ago/);
  assert.match(page, /2026-11-21 11:59:48 UTC/);
  assert.match(page, /<time datetime="2026-11-21T11:59:48\.000Z"/);
  assert.match(page, /<span class="value missing">—<\/span>/, 'a host without cpu.usage shows a dash');
  assert.match(page, /<tr class="host down" data-host-id="db-1">[\s\S]*<span class="status down">down<\/span>/, 'an hour-old report is down');
  assert.match(page, /<tr class="host up" data-host-id="web-1">/);
  assert.match(page, /<span class="spark" data-host-id="web-1"><\/span>/, 'a sparkline slot per host');
  assert.match(page, /<form class="signout" method="post" action="\/signout">/);
  assert.match(page, /Tenant <strong>acme<\/strong>/);
  assert.match(page, /<noscript><meta http-equiv="refresh" content="30"><\/noscript>/, 'reloads only without JavaScript');
});

test('status is judged against each host\'s own interval: late after 2 intervals, down after 5, 10 s when unknown, bounded', () => {
  const at = (silence: number, intervalMs: number | null) => hostStatus({ lastTs: NOW - silence, intervalMs }, NOW);
  assert.equal(at(20_000, 10_000), 'up');
  assert.equal(at(20_001, 10_000), 'late');
  assert.equal(at(50_000, 10_000), 'late');
  assert.equal(at(50_001, 10_000), 'down');
  assert.equal(at(120_000, 60_000), 'up', 'a 1 min agent is not late after 2 min');
  assert.equal(at(300_001, 60_000), 'down');
  assert.equal(at(20_001, null), 'late', 'one report so far: the agent default of 10 s');
  assert.equal(at(2_001, 5), 'late', 'a burst cannot shrink the interval below 1 s');
  assert.equal(at(25 * 60_000 + 1, 7 * 86_400_000), 'down', 'a week-long gap does not hide a dead host for weeks');
  const { counts } = withStatus([host(), host({ hostId: 'b', lastTs: NOW - 30_000 }), host({ hostId: 'c', lastTs: NOW - 60_000 })], NOW);
  assert.deepEqual(counts, { up: 1, late: 1, down: 1 });
});

test('the fleet has reported up to the oldest latest report of the hosts that are not down', () => {
  const hosts = (...lastTs: number[]) => withStatus(lastTs.map((ts, i) => host({ hostId: `h${i}`, lastTs: ts })), NOW).hosts;
  assert.equal(reportedUntil(hosts(NOW - 5_000, NOW - 40_000, NOW - 600_000)), NOW - 40_000, 'the late host holds the edge back, the down one does not');
  assert.equal(reportedUntil(hosts(NOW - 600_000, NOW - 900_000)), undefined, 'every host down: nothing to wait for');
  assert.equal(reportedUntil([]), undefined);
});

test('the host list sorts and filters without JavaScript; missing values sort last', () => {
  const hosts = withStatus([host({ hostId: 'a', hostname: 'alpha', cpuUsage: 10 }), host({ hostId: 'b', hostname: 'beta', cpuUsage: null, platform: 'freebsd' }), host({ hostId: 'c', hostname: 'gamma', cpuUsage: 90 })], NOW).hosts;
  const ids = (q: Record<string, string>) => sortAndFilter(hosts, parseHostListQuery(q)).map((h) => h.hostId);
  assert.deepEqual(ids({}), ['a', 'b', 'c']);
  assert.deepEqual(ids({ sort: 'cpu' }), ['c', 'a', 'b'], 'cpu sorts highest first by default');
  assert.deepEqual(ids({ sort: 'cpu', dir: 'asc' }), ['a', 'c', 'b']);
  assert.deepEqual(ids({ q: 'BSD' }), ['b']);
  assert.deepEqual(ids({ sort: 'nonsense', dir: 'sideways' }), ['a', 'b', 'c'], 'unknown sort falls back to name');
  const page = render(hosts, { list: parseHostListQuery({ sort: 'cpu', dir: 'desc' }) });
  assert.match(page, /<th scope="col" aria-sort="descending"><a href="\/\?sort=cpu&amp;dir=asc&amp;range=1h" data-sort="cpu">CPU<\/a><\/th>/);
});

test('the time range comes from the URL: presets end now, from/to is fixed, junk falls back to 1 h', () => {
  assert.deepEqual(parseTimeRange({ range: '6h' }, NOW), { from: NOW - 6 * 3_600_000, to: NOW, preset: '6h' });
  assert.deepEqual(parseTimeRange({ from: '1000', to: '2000', range: '6h' }, NOW), { from: 1000, to: 2000, preset: null });
  assert.deepEqual(parseTimeRange({ from: '2026-11-21T10:00', to: '2026-11-21T11:30' }, NOW), { from: Date.UTC(2026, 10, 21, 10), to: Date.UTC(2026, 10, 21, 11, 30), preset: null }, 'the no-JavaScript form is read as UTC');
  assert.deepEqual(parseTimeRange({ from: '2000', to: '1000' }, NOW), { from: NOW - 3_600_000, to: NOW, preset: '1h' });
  assert.deepEqual(parseTimeRange({ range: '__proto__' }, NOW), { from: NOW - 3_600_000, to: NOW, preset: '1h' });
  // Before 1970: no report can be there and the series API takes no negative time, so its charts could never load.
  assert.deepEqual(parseTimeRange({ from: '1969-12-31T00:00', to: '1970-01-02T00:00' }, NOW), { from: NOW - 3_600_000, to: NOW, preset: '1h' });
  // Past the largest time a Date holds, the page drew its range bar from an invalid Date (a 500): now junk like any other.
  assert.deepEqual(parseTimeRange({ from: '1', to: '9000000000000000' }, NOW), { from: NOW - 3_600_000, to: NOW, preset: '1h' });
  assert.deepEqual(parseTimeRange({ from: '1', to: '8640000000000000' }, NOW), { from: 1, to: 8.64e15, preset: null });
  assert.equal(rangeQuery({ from: 1, to: 2, preset: null }), 'from=1&to=2');
});

test('the series window: up to 3 days the range at up to 1000 points, longer whole hours at one point per hour (or per few hours past the budget)', () => {
  const H = 3_600_000;
  assert.deepEqual(seriesWindow({ from: NOW - H, to: NOW }, CHART_POINTS), { from: NOW - H, to: NOW, points: 1000 });
  assert.deepEqual(seriesWindow({ from: NOW - 72 * H + 1, to: NOW }, CHART_POINTS), { from: NOW - 72 * H + 1, to: NOW, points: 1000 });
  const week = seriesWindow({ from: NOW - 7 * 24 * H + 1234, to: NOW + 1234 }, CHART_POINTS);
  assert.deepEqual(week, { from: NOW - 7 * 24 * H, to: NOW + H - 1, points: 169 });
  assert.equal(seriesUrl('/api/v1/aggregate', { from: NOW - H, to: NOW }, CHART_POINTS), `/api/v1/aggregate?from=${NOW - H}&to=${NOW}&points=1000&minmax=true`);
  // Past 1000 hours (a range of years), a point per whole number of hours, so the answer stays within the chart's budget.
  const years = seriesWindow({ from: NOW - 2 * 365 * 24 * H, to: NOW }, CHART_POINTS);
  assert.deepEqual(years, { from: NOW - 2 * 365 * 24 * H, to: NOW - 2 * 365 * 24 * H + 974 * 18 * H - 1, points: 974 });
  assert.ok(years.to >= NOW);
  const all = seriesWindow({ from: 1, to: 8.64e15 }, CHART_POINTS);
  assert.ok(all.points <= 1000 && all.to >= 8.64e15 && (all.to + 1 - all.from) % (all.points * H) === 0, JSON.stringify(all));
  // A smaller budget (the tenant's answer limit): 30 days at two hours a point.
  assert.deepEqual(seriesWindow({ from: NOW - 30 * 24 * H, to: NOW - 1 }, 708), { from: NOW - 30 * 24 * H, to: NOW - 1, points: 360 });
  assert.deepEqual(seriesWindow({ from: NOW - H, to: NOW }, 708), { from: NOW - H, to: NOW, points: 708 });
});

test('agent-supplied hostname, host id and platform render only as text', () => {
  const page = render([host({ hostname: HOSTILE, hostId: `"><script>alert(2)</script>`, platform: `Tom & Jerry's "OS" <b>` })], { session: false });
  assert.ok(!page.includes('<img'), 'no img element');
  assert.ok(!page.includes('<script>'), 'no injected script element');
  assert.equal(page.match(/<script/g)?.length, 2, 'only the two same-origin script files');
  assert.ok(!page.includes('<b>'));
  assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt;/);
  assert.match(page, /Tom &amp; Jerry&#39;s &quot;OS&quot; &lt;b&gt;/);
});

test('no page carries inline script, inline style or a third-party URL', () => {
  const range = parseTimeRange({}, NOW);
  const fleet = fleetPageParts({ range, now: NOW, reportedUntil: NOW, tenantName: 'acme', session: true, maxPoints: 5000 });
  const pages = [
    render([host()], { session: true }),
    render([]),
    renderSignIn({ error: 'That token is not valid.' }),
    fleet.start.value + fleetPageRest({ range, hosts: 1, top: { cpu: [], memory: [], disk: [] }, alerts: [] }).value + fleet.end.value,
  ];
  for (const page of pages) {
    assert.doesNotMatch(page, /<script(?! src="\/static\/[\w.]+\.js"><\/script>)|<style|\sstyle=|\son\w+=/i, 'scripts only as same-origin files');
    assert.doesNotMatch(page, /https?:\/\//, 'every URL is same-origin');
  }
});

test('the fleet page asks for no more points than the tenant\'s answer limit allows, and tells its script', () => {
  const range = parseTimeRange({ range: '30d' }, NOW);
  const page = (maxPoints: number) => fleetPageParts({ range, now: NOW, reportedUntil: NOW, tenantName: 'acme', session: true, maxPoints }).start.value;
  assert.match(page(5000), /data-max-points="1000"/);
  assert.match(page(5000), /points=721&amp;minmax=true/);
  assert.match(page(708), /data-max-points="708"/);
  assert.match(page(708), /points=361&amp;minmax=true/, 'two hours a point: 721 hourly points would pass 708');
});

test('bearer callers get no sign-out button; an empty tenant gets guidance', () => {
  const page = render([]);
  assert.doesNotMatch(page, /signout/);
  assert.match(page, /No host has reported yet/);
});

test('the sign-in page posts the token to /signin and shows an error as text', () => {
  const page = renderSignIn({ error: `<b>bad</b>` });
  assert.match(page, /<form method="post" action="\/signin">/);
  assert.match(page, /<input id="token" name="token" type="password"/);
  assert.match(page, /&lt;b&gt;bad&lt;\/b&gt;/);
  assert.doesNotMatch(renderSignIn(), /role="alert"/);
});

test('every asset the pages link to is in the static allow-list', async () => {
  const assets = await loadStaticAssets();
  const linked = [...render([host()], { session: true }).matchAll(/(?:href|src)="\/static\/([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(linked.length >= 2);
  for (const name of linked) assert.ok(assets.has(name), name);
  assert.equal(assets.get('dashboard.css')!.contentType, 'text/css; charset=utf-8');
});

test('every page of a tenant carries the ingest-paused notice when asked, and none otherwise', () => {
  const range = parseTimeRange({}, NOW);
  const pages = (ingestPaused: boolean) => [
    render([host()], { session: true, ingestPaused }),
    fleetPageParts({ range, now: NOW, reportedUntil: NOW, tenantName: 'acme', session: true, maxPoints: 5000, ingestPaused }).start.value,
    hostPageParts({ host: withStatus([host()], NOW).hosts[0]!, range, metric: undefined, now: NOW, tenantName: 'acme', session: true, maxPoints: 5000, ingestPaused }).start.value,
  ];
  for (const page of pages(true)) assert.match(page, /<main[^>]*>\n<p class="notice ingest-paused" role="status">Reports are not being accepted: the server&#39;s disk is nearly full\./);
  for (const page of pages(false)) assert.doesNotMatch(page, /ingest-paused/);
});
