import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { IssuedToken } from '../../src/metrics/domain/tenant-tokens.js';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';

/**
 * The dashboard's read endpoints (host status, top hosts, sparklines) and its
 * host and fleet pages over HTTP, on both backends: results, errors, and
 * that no tenant sees another's hosts through any of them.
 */
const HOSTILE = '<img src=x onerror=alert(1)>';
const HTML_ACCEPT = 'text/html,application/xhtml+xml';

for (const backend of BACKENDS) {
  describe(`dashboard reads on ${backend}`, () => {
    let h: MetricsHarness;
    let acme: IssuedToken;
    let globex: IssuedToken;
    const now = Date.now();

    before(async () => {
      h = await startMetrics(backend, { now: () => now });
      acme = await h.newTenant('acme');
      globex = await h.newTenant('globex');
      const disks = (root: number, data: number) => [
        { path: '/', total: 100, used: root, available: 100 - root, percent: root },
        { path: '/data', total: 100, used: data, available: 100 - data, percent: data },
      ];
      const fleet: Array<[string, number, number, number, number]> = [
        // host, cpu, memory %, / %, /data %
        ['a', 10, 90, 20, 95], ['b', 50, 40, 70, 10], ['c', 90, 20, 30, 30],
      ];
      for (let i = 0; i < 6; i++) {
        for (const [id, cpu, mem, root, data] of fleet) {
          const r = await ingest(h.url, acme.token, makeReport({
            agentId: id, hostname: id === 'c' ? HOSTILE : `${id}.acme`, ts: now - 60_000 + i * 10_000 - (id === 'a' ? 30_000 : 0),
            cpu: { usage: cpu + i }, memory: { total: 100, used: mem, free: 100 - mem, percent: mem }, disks: disks(root, data),
          }));
          assert.equal(r.status, 200, r.text);
        }
      }
      assert.equal((await ingest(h.url, globex.token, makeReport({ agentId: 'g-secret', hostname: 'globex-db', ts: now, cpu: { usage: 99.9 } }))).status, 200);
    });

    after(() => h.close());

    test('GET /api/v1/hosts/status: each host with its status and the counts', async () => {
      const r = await call(h.url, 'GET', '/api/v1/hosts/status', { token: acme.token });
      assert.equal(r.status, 200);
      assert.equal(r.body.now, now);
      assert.ok(r.body.hosts.every((x: { intervalMs: number }) => x.intervalMs === 10_000), 'each host\'s own interval');
      const byId = Object.fromEntries(r.body.hosts.map((x: { hostId: string; status: string }) => [x.hostId, x.status]));
      assert.deepEqual(byId, { a: 'late', b: 'up', c: 'up' }, 'a: silent 40 s at a 10 s interval');
      assert.deepEqual(r.body.counts, { up: 2, late: 1, down: 0 });
      assert.equal(r.body.hosts.find((x: { hostId: string }) => x.hostId === 'a').diskPercent, 95, 'the fullest filesystem');
      const other = await call(h.url, 'GET', '/api/v1/hosts/status', { token: globex.token });
      assert.deepEqual(other.body.hosts.map((x: { hostId: string }) => x.hostId), ['g-secret']);
      assert.equal((await call(h.url, 'GET', '/api/v1/hosts/status')).status, 401);
    });

    test('GET /api/v1/top ranks hosts by their mean over the range; disk means the fullest filesystem', async () => {
      const q = `from=${now - 3_600_000}&to=${now}`;
      const cpu = await call(h.url, 'GET', `/api/v1/top?metric=cpu.usage&${q}`, { token: acme.token });
      assert.equal(cpu.status, 200);
      assert.deepEqual(cpu.body.map((x: { hostId: string; value: number }) => [x.hostId, x.value]), [['c', 92.5], ['b', 52.5], ['a', 12.5]]);
      assert.equal(cpu.body[0].hostname, HOSTILE, 'names as data; the page escapes them');
      const disk = await call(h.url, 'GET', `/api/v1/top?metric=disk&${q}&limit=2`, { token: acme.token });
      assert.deepEqual(disk.body.map((x: { hostId: string; metric: string; value: number }) => [x.hostId, x.metric, x.value]), [['a', 'disk./data.percent', 95], ['b', 'disk./.percent', 70]]);
      const none = await call(h.url, 'GET', `/api/v1/top?metric=no.such.metric&${q}`, { token: acme.token });
      assert.deepEqual(none.body, []);
      const old = await call(h.url, 'GET', `/api/v1/top?metric=cpu.usage&from=0&to=1000`, { token: acme.token });
      assert.deepEqual(old.body, [], 'nothing in range');
      const other = await call(h.url, 'GET', `/api/v1/top?metric=cpu.usage&${q}`, { token: globex.token });
      assert.deepEqual(other.body.map((x: { hostId: string }) => x.hostId), ['g-secret']);
      for (const bad of ['', 'metric=cpu.usage&limit=0', 'metric=cpu.usage&limit=101', `metric=cpu.usage&from=${now}&to=${now - 1}`]) {
        const r = await call(h.url, 'GET', `/api/v1/top?${bad}`, { token: acme.token });
        assert.equal(r.status, 400, bad);
        assert.equal(r.body.error, 'invalid_request');
      }
    });

    test('GET /api/v1/top/lists gives several top lists from one pass, each as /api/v1/top gives it', async () => {
      const q = `from=${now - 3_600_000}&to=${now}&limit=2`;
      const r = await call(h.url, 'GET', `/api/v1/top/lists?metrics=cpu.usage,disk,no.such.metric&${q}`, { token: acme.token });
      assert.equal(r.status, 200);
      assert.deepEqual(Object.keys(r.body.lists), ['cpu.usage', 'disk', 'no.such.metric']);
      for (const m of ['cpu.usage', 'disk', 'no.such.metric']) {
        assert.deepEqual(r.body.lists[m], (await call(h.url, 'GET', `/api/v1/top?metric=${m}&${q}`, { token: acme.token })).body, m);
      }
      assert.equal(r.body.hosts, 3, 'hosts with reports in the range');
      const other = await call(h.url, 'GET', `/api/v1/top/lists?metrics=cpu.usage&${q}`, { token: globex.token });
      assert.deepEqual(other.body.lists['cpu.usage'].map((x: { hostId: string }) => x.hostId), ['g-secret']);
      // Ten names of the longest a metric name may be (256): 2,569 characters (the bound was 1,024).
      const longest = Array.from({ length: 10 }, (_, i) => `m${i}`.padEnd(256, 'x'));
      const long = await call(h.url, 'GET', `/api/v1/top/lists?metrics=${longest.join(',')}&${q}`, { token: acme.token });
      assert.equal(long.status, 200, long.text.slice(0, 200));
      assert.deepEqual(Object.keys(long.body.lists), longest);
      const eleven = Array.from({ length: 11 }, (_, i) => `m${i}`).join(',');
      for (const bad of ['', 'metrics=', 'metrics=,cpu.usage', 'metrics=cpu.usage,', `metrics=${eleven}`, 'metrics=cpu.usage&limit=0', `metrics=cpu.usage&from=${now}&to=${now - 1}`]) {
        const bad400 = await call(h.url, 'GET', `/api/v1/top/lists?${bad}`, { token: acme.token });
        assert.equal(bad400.status, 400, bad);
        assert.equal(bad400.body.error, 'invalid_request');
      }
      assert.equal((await call(h.url, 'GET', '/api/v1/top/lists?metrics=cpu.usage')).status, 401);
    });

    test('GET /api/v1/sparklines: one metric per host, within the point budget', async () => {
      const r = await call(h.url, 'GET', `/api/v1/sparklines?metric=cpu.usage&from=${now - 3_600_000}&to=${now}&points=3`, { token: acme.token });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.map((x: { hostId: string }) => x.hostId), ['a', 'b', 'c']);
      for (const s of r.body as { timestamps: number[]; values: number[] }[]) {
        assert.ok(s.values.length <= 3 && s.values.length === s.timestamps.length && s.values.length > 0);
      }
      const raw = await call(h.url, 'GET', `/api/v1/sparklines?metric=cpu.usage&from=${now - 3_600_000}&to=${now}`, { token: acme.token });
      assert.deepEqual(raw.body.find((x: { hostId: string }) => x.hostId === 'b').values, [50, 51, 52, 53, 54, 55]);
      // A metric named like an Object property is a metric no host has: every value null (it read the prototype's once).
      for (const metric of ['__proto__', 'constructor', 'toString']) {
        const odd = await call(h.url, 'GET', `/api/v1/sparklines?metric=${metric}&from=${now - 3_600_000}&to=${now}`, { token: acme.token });
        assert.equal(odd.status, 200, metric);
        for (const s of odd.body as { timestamps: number[]; values: unknown[] }[]) {
          assert.ok(Array.isArray(s.values) && s.values.length === s.timestamps.length && s.values.every((v) => v === null), `${metric}: ${JSON.stringify(s)}`);
        }
        const top = await call(h.url, 'GET', `/api/v1/top?metric=${metric}&from=${now - 3_600_000}&to=${now}`, { token: acme.token });
        assert.equal(top.status, 200, metric);
      }
      assert.equal((await call(h.url, 'GET', '/api/v1/sparklines?metric=cpu.usage&points=501', { token: acme.token })).status, 400);
      for (const [query, details] of [['from=20&to=10', /after to/], ['from=abc', /from: must be a decimal integer/], ['points=0', /points: must be >= 1/], ['', /metric: is required/]] as const) {
        const r = await call(h.url, 'GET', `/api/v1/sparklines?${query.length ? `metric=cpu.usage&${query}` : ''}`, { token: acme.token });
        assert.deepEqual([r.status, r.body.error], [400, 'invalid_request'], query);
        assert.match(r.body.details, details, query);
      }
      assert.equal((await call(h.url, 'GET', '/api/v1/sparklines?metric=cpu.usage')).status, 401);
    });

    test('top, top lists and sparklines ignore query parameters they do not define, as every other read does', async () => {
      const q = `from=${now - 3_600_000}&to=${now}`;
      // Parameters of the series reads (and of each other) that the route does not define: they once rode into the
      // per-host read (a 400, or every value gone).
      const reads: Array<[string, string[]]> = [
        [`/api/v1/top?metric=cpu.usage&${q}`, ['metrics=cpu.usage', 'points=20000', 'minmax=true', 'unknown=1']],
        [`/api/v1/top/lists?metrics=cpu.usage,disk&${q}`, ['metric=memory.percent', 'points=20000', 'minmax=true', 'unknown=1']],
        [`/api/v1/sparklines?metric=cpu.usage&${q}`, ['metrics=cpu.usage', 'limit=1', 'minmax=true', 'unknown=1']],
      ];
      for (const [path, extras] of reads) {
        const plain = await call(h.url, 'GET', path, { token: acme.token });
        assert.equal(plain.status, 200, path);
        for (const extra of extras) {
          const r = await call(h.url, 'GET', `${path}&${extra}`, { token: acme.token });
          assert.equal(r.status, 200, `${path}&${extra}: ${r.text.slice(0, 200)}`);
          assert.deepEqual(r.body, plain.body, `${path}&${extra}`);
        }
      }
    });

    test('a range past the largest time a Date holds falls back to the default view on every page (it was a 500)', async () => {
      for (const path of ['/', '/hosts/c', '/fleet']) {
        const r = await fetch(`${h.url}${path}?from=1&to=9000000000000000`, { headers: { authorization: `Bearer ${acme.token}`, accept: HTML_ACCEPT } });
        assert.equal(r.status, 200, path);
        assert.match(await r.text(), /data-preset="1h"/, path);
      }
    });

    test('the host page shows the host, every metric and escapes agent text; another tenant\'s host is a 404', async () => {
      const page = await fetch(`${h.url}/hosts/c?range=1h`, { headers: { authorization: `Bearer ${acme.token}`, accept: HTML_ACCEPT } });
      assert.equal(page.status, 200);
      assert.equal(page.headers.get('cache-control'), 'no-store');
      const body = await page.text();
      assert.ok(!body.includes('<img'), 'escaped');
      assert.match(body, /&lt;img src=x onerror=alert\(1\)&gt;/);
      assert.match(body, /data-metric="cpu\.usage"/);
      assert.match(body, /<td data-label="Mean">92\.5 %<\/td><td data-label="Min">90\.0 %<\/td><td data-label="Max">95\.0 %<\/td>/);
      assert.match(body, /<main data-page="host" data-host-id="c"/);
      // Streamed: the charts' frame and the scripts before the table of every metric, and the document is whole.
      assert.ok(body.indexOf('<script src="/static/dashboard.js">') < body.indexOf('<section class="metrics-list">'));
      assert.match(body, /<\/main>\n<\/body>\n<\/html>\n$/);
      const foreign = await fetch(`${h.url}/hosts/g-secret`, { headers: { authorization: `Bearer ${acme.token}`, accept: HTML_ACCEPT } });
      assert.equal(foreign.status, 404);
      assert.doesNotMatch(await foreign.text(), /globex-db/);
      const json404 = await call(h.url, 'GET', '/hosts/g-secret', { token: acme.token });
      assert.equal(json404.status, 404);
      assert.equal(json404.body.error, 'not_found', 'a script gets the JSON error');
      const anon = await fetch(`${h.url}/hosts/c`, { redirect: 'manual', headers: { accept: HTML_ACCEPT } });
      assert.equal(anon.status, 303);
    });

    test('the host page of a host id of the full 128 characters opens', async () => {
      const initech = await h.newTenant('initech');
      const id = `${'n'.repeat(120)}.example`;
      assert.equal((await ingest(h.url, initech.token, makeReport({ agentId: id, ts: now - 120_000 }))).status, 200);
      const page = await fetch(`${h.url}/hosts/${id}`, { headers: { authorization: `Bearer ${initech.token}`, accept: HTML_ACCEPT } });
      assert.equal(page.status, 200);
      assert.match(await page.text(), new RegExp(`<main data-page="host" data-host-id="${id}"`));
      for (const long of [`${id}x`, 'a'.repeat(5000)]) {
        const r = await call(h.url, 'GET', `/hosts/${long}`, { token: initech.token });
        assert.deepEqual([r.status, r.body.error], [404, 'not_found'], `${long.length} characters: an id no report could carry`);
      }
    });

    test('the fleet page lists the top hosts of its tenant only', async () => {
      const page = await fetch(`${h.url}/fleet?range=1h`, { headers: { authorization: `Bearer ${acme.token}` } });
      assert.equal(page.status, 200);
      const body = await page.text();
      assert.match(body, /<span class="fleet-hosts">3<\/span> hosts reported in the range/);
      // Streamed: the charts' frame and the scripts come before the top lists, and the document is whole.
      assert.ok(body.indexOf('<section class="charts"') < body.indexOf('<script src="/static/dashboard.js">'));
      assert.ok(body.indexOf('<script src="/static/dashboard.js">') < body.indexOf('<section class="top-hosts">'));
      assert.match(body, /<\/main>\n<\/body>\n<\/html>\n$/);
      assert.match(body, /<div class="top" data-top="cpu">[\s\S]*&lt;img src=x[\s\S]*92\.5 %/);
      assert.match(body, /<div class="top" data-top="disk">[\s\S]*a\.acme<\/a> <span class="fs">\/data<\/span> <span class="value">95\.0 %/);
      assert.doesNotMatch(body, /g-secret|globex-db|99\.9/);
    });
  });
}

test('the reads of every host (top, top lists, sparklines) are shed with the series reads when a tenant has too many in progress', async (t) => {
  // No slot for anyone: every expensive request is refused at once, and only those.
  const h = await startMetrics('sqlite', { maxExpensivePerPrincipal: 0 });
  t.after(() => h.close());
  const tenant = await h.newTenant('shed');
  for (const path of ['/api/v1/top?metric=cpu.usage', '/api/v1/top/lists?metrics=cpu.usage', '/api/v1/sparklines?metric=cpu.usage', '/api/v1/aggregate', '/api/v1/host/web-1']) {
    const r = await call(h.url, 'GET', path, { token: tenant.token });
    assert.deepEqual([r.status, r.body.error, r.headers.get('retry-after')], [503, 'unavailable', '1'], path);
  }
  for (const path of ['/api/v1/hosts', '/api/v1/hosts/status', '/api/v1/alerts']) assert.equal((await call(h.url, 'GET', path, { token: tenant.token })).status, 200, path);
});

test('the host and fleet pages take a slot of the same bounds: a browser refused gets a page that reloads itself, a script the JSON 503', async (t) => {
  const h = await startMetrics('sqlite', { maxExpensivePerPrincipal: 1 });
  t.after(() => h.close());
  const tenant = await h.newTenant('busy');
  assert.equal((await ingest(h.url, tenant.token, makeReport({ agentId: 'web-1', ts: Date.now() }))).status, 200);
  // The tenant's one slot is held (an aggregate in progress, say).
  const release = h.app.shedExpensive!(tenant.tenantId);
  for (const page of ['/hosts/web-1', '/fleet']) {
    const browser = await call(h.url, 'GET', page, { token: tenant.token, headers: { accept: HTML_ACCEPT } });
    assert.equal(browser.status, 503, page);
    assert.equal(browser.headers.get('retry-after'), '1');
    assert.match(browser.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(String(browser.body), /<meta http-equiv="refresh" content="2">/);
    assert.match(String(browser.body), /The server is busy/);
    const script = await call(h.url, 'GET', page, { token: tenant.token });
    assert.deepEqual([script.status, script.body.error], [503, 'unavailable'], page);
  }
  // Another tenant is not held back, and a page gives its slot back once its streamed part is written.
  const other = await h.newTenant('other');
  assert.equal((await call(h.url, 'GET', '/fleet', { token: other.token, headers: { accept: HTML_ACCEPT } })).status, 200);
  release();
  for (let i = 0; i < 3; i++) assert.equal((await call(h.url, 'GET', '/hosts/web-1', { token: tenant.token, headers: { accept: HTML_ACCEPT } })).status, 200, `page ${i}`);
});

test('under a --series-points-max below the charts\' 1000 points and the sparklines\' 60, the pages ask no more than it', async (t) => {
  const h = await startMetrics('sqlite', { seriesPoints: 40, seriesPointsMax: 40 });
  t.after(() => h.close());
  const tenant = await h.newTenant('capped');
  const now = Date.now();
  for (let i = 0; i < 5; i++) assert.equal((await ingest(h.url, tenant.token, makeReport({ agentId: 'web-1', ts: now - 60_000 + i * 10_000 }))).status, 200);
  for (const page of ['/hosts/web-1', '/fleet', '/hosts/web-1?range=30d', '/fleet?range=30d']) {
    const r = await call(h.url, 'GET', page, { token: tenant.token, headers: { accept: HTML_ACCEPT } });
    const body = String(r.body);
    assert.match(body, /data-max-points="40"/, `${page}: the script's budget`);
    // The charts' first request, which the page embeds and preloads.
    const preload = /<link rel="preload" href="([^"]+)"/.exec(body)?.[1]?.replaceAll('&amp;', '&');
    assert.ok(preload, page);
    assert.ok(Number(new URL(preload, h.url).searchParams.get('points')) <= 40, preload);
    const series = await call(h.url, 'GET', preload, { token: tenant.token });
    assert.equal(series.status, 200, `${preload}: ${series.text}`);
  }
  // The host list's script asks its sparklines at min(60, this).
  assert.match(String((await call(h.url, 'GET', '/', { token: tenant.token, headers: { accept: HTML_ACCEPT } })).body), /data-max-points="40"/);
});
