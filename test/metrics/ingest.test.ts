import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';

const NOW = Date.UTC(2026, 10, 21, 12);

async function receiver(status: number): Promise<{ url: string; server: Server; bodies: unknown[] }> {
  const bodies: unknown[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => { text += c.toString(); });
    req.on('end', () => { bodies.push(JSON.parse(text)); res.writeHead(status).end(); });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return { url: `http://127.0.0.1:${addr.port}/hook`, server, bodies };
}

for (const backend of BACKENDS) {
  describe(`POST /api/v1/ingest on ${backend}`, () => {
    let m: MetricsHarness;
    let token: string;
    let ok: Awaited<ReturnType<typeof receiver>>;
    let failing: Awaited<ReturnType<typeof receiver>>;
    before(async () => {
      ok = await receiver(200);
      failing = await receiver(500);
      const s = await import('../helpers/backends.js').then((b) => b.freshStorage('sqlite'));
      const routesFile = path.join(s.dataDir, 'routes.json');
      writeFileSync(routesFile, JSON.stringify({ routes: [
        { name: 'pager', match: { severity: ['critical'] }, url: failing.url },
        { name: 'chat', url: ok.url },
      ] }));
      m = await startMetrics(backend, { now: () => NOW, bodyLimit: 64 * 1024, maxMetricsPerHost: 40, maxMetricsPerTenant: 60, maxHostsPerTenant: 4, alertRoutes: routesFile });
      after(() => s.cleanup());
      token = (await m.newTenant()).token;
    });
    after(async () => {
      await m.close();
      ok.server.close();
      failing.server.close();
    });

    test('stores a report and answers 200 with what was stored', async () => {
      const r = await ingest(m.url, token, makeReport({ agentId: 'a-200', ts: NOW }));
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, { hostId: 'a-200', ts: NOW, metrics: 28, duplicate: false, alertResults: [] });
    });

    test('re-sending the same host and ts is idempotent: 200, duplicate, never counted twice', async () => {
      const t = await m.newTenant();
      const first = await ingest(m.url, t.token, makeReport({ ts: NOW, cpu: { usage: 10 } }));
      const again = await ingest(m.url, t.token, makeReport({ ts: NOW, cpu: { usage: 90 } }));
      assert.equal(first.body.duplicate, false);
      assert.equal(again.status, 200);
      assert.equal(again.body.duplicate, true);
      const s = await call(m.url, 'GET', `/api/v1/host/agent-1?from=${NOW}&to=${NOW}`, { token: t.token });
      assert.deepEqual(s.body.timestamps, [NOW]);
      assert.deepEqual(s.body.metrics['cpu.usage'], [10]);
    });

    test('unknown extra fields are tolerated (and not stored)', async () => {
      const t = await m.newTenant();
      const r = await ingest(m.url, t.token, makeReport({ agentId: 'a-extra', ts: NOW, kernel: '6.1', uptime: 5, cpu: { usage: 5, model: 'x', temperature: 40 } as never }));
      assert.equal(r.status, 200);
      assert.equal(r.body.metrics, 18);
      const s = await call(m.url, 'GET', `/api/v1/host/a-extra?from=${NOW}&to=${NOW}`, { token: t.token });
      assert.deepEqual(s.body.metrics['cpu.temperature'], [40], 'a numeric leaf of a known section is a metric');
      assert.ok(!Object.keys(s.body.metrics).some((k) => /kernel|uptime|model/.test(k)), 'strings and unknown top-level fields are not');
    });

    const bad: Array<[string, unknown, RegExp]> = [
      ['a missing required field', (() => { const r = makeReport() as Record<string, unknown>; delete r['hostname']; return r; })(), /^body hostname: is required$/],
      ['a missing cpu.usage', makeReport({ cpu: {} as never }), /^body cpu\.usage: is required$/],
      ['a number sent as a string', makeReport({ cpu: { usage: '12' as never } }), /^body cpu\.usage: must be number$/],
      ['a fractional ts', makeReport({ ts: NOW + 0.5 }), /^body ts: must be integer$/],
      ['a negative byte count', makeReport({ memory: { total: -1, used: 0, free: 0, percent: 0 } }), /^body memory\.total: must be >= 0$/],
      ['a percentage above 100', makeReport({ disks: [{ path: '/', total: 1, used: 1, available: 0, percent: 101 }] }), /^body disks\.0\.percent: must be <= 100$/],
      ['a load average that is not three numbers', makeReport({ cpu: { usage: 1, loadAverage: [1, 2] } }), /^body cpu\.loadAverage: must NOT have fewer than 3 items$/],
      ['an agentId unsafe in a URL', makeReport({ agentId: 'a/../b' }), /^body agentId: must match pattern/],
      ['a ts far in the future', makeReport({ ts: NOW + 3_600_000 }), /^body ts: .* ms ahead of the server clock/],
      ['a ts older than the retention', makeReport({ ts: NOW - 31 * 86_400_000 }), /^body ts: .* older than the retention/],
      ['a huge array', makeReport({ cpu: { usage: 1, perCore: Array.from({ length: 2000 }, () => 1) } }), /^body cpu\.perCore: must NOT have more than 1024 items$/],
      ['an alert of the wrong shape', makeReport({ alerts: [{ name: 'x', severity: 'apocalyptic' }] as never }), /^body alerts\.0\.severity/],
      ['a JSON array body', [1, 2, 3], /^body: must be object$/],
      ['two disks with one path', makeReport({ ts: NOW, disks: [{ path: '/', total: 1, used: 0, available: 1, percent: 0 }, { path: '/', total: 2, used: 0, available: 2, percent: 0 }] }),
        /^body disks\.1\.total: metric disk\.\/\.total is reported twice$/],
      ['a metric name over 256 characters', makeReport({ ts: NOW, network: { ['k'.repeat(260)]: 1 } as never }), /^body network\.k{260}/],
      ['nesting deeper than 6 levels inside network', makeReport({ ts: NOW, network: { a: { a: { a: { a: { a: { a: { a: 1 } } } } } } } as never }), /^body network\.a\.a\.a\.a\.a\.a: nested deeper than 6 levels$/],
    ];
    for (const [what, body, details] of bad) {
      test(`400 for ${what}, naming the field; nothing stored`, async () => {
        const t = await m.newTenant();
        const r = await ingest(m.url, t.token, body);
        assert.equal(r.status, 400);
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, details);
        assert.deepEqual((await call(m.url, 'GET', '/api/v1/hosts', { token: t.token })).body, []);
      });
    }

    test('hostile bodies get 400 JSON errors: 1e400, NaN, bad JSON, deep nesting, prototype keys', async () => {
      const base = JSON.stringify(makeReport({ ts: NOW }));
      const cases: Array<[string, RegExp]> = [
        [base.replace('"usage":12.5', '"usage":1e400'), /cpu\.usage: must be <= 100/],
        [base.replace('"rxBytes":1000000', '"rxBytes":1e400'), /network\.rxBytes: must be a finite number/],
        [base.replace('"rxBytes":1000000', '"rxBytes":NaN'), /not valid JSON/],
        [base.slice(0, -5), /not valid JSON/],
        [base.replace('"network":{', `"network":{"deep":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)},`), /nested deeper than/],
        [base.replace('"network":{', `"network":{"deep":${'['.repeat(20000)}${']'.repeat(20000)},`), /nested deeper than/],
        [base.replace('"network":{', '"network":{"__proto__":{"x":1},'), /not valid JSON/],
        [base.replace('"network":{', '"network":{"constructor":{"prototype":{"x":1}},'), /not valid JSON/],
        [base.replace(/}$/, ',"alerts":[{"name":"x","severity":"info","value":1e400}]}'), /^body alerts\.0\.value: must be a finite number$/],
        [base.replace(/}$/, ',"alerts":[{"name":"x","severity":"info"},{"name":"y","severity":"info","threshold":-1e400}]}'), /^body alerts\.1\.threshold: must be a finite number$/],
      ];
      for (const [body, details] of cases) {
        const r = await ingest(m.url, token, body);
        assert.equal(r.status, 400, body.slice(0, 80));
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, details);
        assert.doesNotMatch(r.text, /\bat \w+ \(/);
      }
      assert.equal(({} as Record<string, unknown>)['x'], undefined);
    });

    test('415 for a body that is not JSON, 413 past the body limit', async () => {
      let r = await call(m.url, 'POST', '/api/v1/ingest', { token, body: 'cpu=1', headers: { 'content-type': 'text/plain' } });
      assert.equal(r.status, 415);
      assert.equal(r.body.error, 'unsupported_media_type');
      r = await call(m.url, 'POST', '/api/v1/ingest', { token, body: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      assert.equal(r.status, 415);
      r = await ingest(m.url, token, makeReport({ ts: NOW, padding: 'x'.repeat(70 * 1024) }));
      assert.equal(r.status, 413);
      assert.equal(r.body.error, 'payload_too_large');
    });

    test('422 past the per-host or per-tenant metric-name limit; the report is not stored', async () => {
      const t = await m.newTenant();
      const many = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));
      let r = await ingest(m.url, t.token, makeReport({ agentId: 'h1', ts: NOW, network: many('n', 20) }));
      assert.equal(r.status, 422);
      assert.equal(r.body.error, 'limit_exceeded');
      assert.match(r.body.details, /host h1 to 44 distinct metric names; the limit is 40/);
      r = await ingest(m.url, t.token, makeReport({ agentId: 'h1', ts: NOW, network: many('n', 10) }));
      assert.equal(r.status, 200);
      r = await ingest(m.url, t.token, makeReport({ agentId: 'h2', ts: NOW, network: many('m', 30) }));
      assert.equal(r.status, 422);
      assert.match(r.body.details, /tenant to 64 distinct metric names; the limit is 60/);
      assert.deepEqual((await call(m.url, 'GET', '/api/v1/hosts', { token: t.token })).body, ['h1']);
    });

    test('422 for a report of a new host past the per-tenant host limit, sent alone or as a bulk line; known hosts go on', async () => {
      const t = await m.newTenant();
      for (const h of ['h1', 'h2', 'h3', 'h4']) assert.equal((await ingest(m.url, t.token, makeReport({ agentId: h, ts: NOW }))).status, 200);
      const details = 'the report\'s new host h5 would take the tenant to 5 hosts; the limit is 4';
      const r = await ingest(m.url, t.token, makeReport({ agentId: 'h5', ts: NOW }));
      assert.equal(r.status, 422);
      assert.deepEqual(r.body, { error: 'limit_exceeded', details });
      const body = [makeReport({ agentId: 'h5', ts: NOW }), makeReport({ agentId: 'h1', ts: NOW - 1000 })].map((x) => JSON.stringify(x)).join('\n');
      const b = await call(m.url, 'POST', '/api/v1/ingest/bulk', { token: t.token, body, headers: { 'content-type': 'application/x-ndjson' } });
      assert.equal(b.status, 200, b.text);
      assert.deepEqual(b.body.results.map((x: { status: string; error?: string; details?: string }) => [x.status, x.error, x.details]),
        [['rejected', 'limit_exceeded', details], ['stored', undefined, undefined]]);
      assert.deepEqual((await call(m.url, 'GET', '/api/v1/hosts', { token: t.token })).body, ['h1', 'h2', 'h3', 'h4']);
    });

    test('401 JSON for a missing, malformed, unknown or revoked token, before the body is read', async () => {
      const t = await m.newTenant();
      const body = JSON.stringify(makeReport({ ts: NOW }));
      const cases: Array<[Record<string, string>, RegExp]> = [
        [{}, /missing Authorization/],
        [{ authorization: `Basic ${t.token}` }, /malformed/],
        [{ authorization: 'Bearer' }, /malformed/],
        [{ authorization: 'Bearer mtk_unknownunknownunknown' }, /unknown or revoked/],
      ];
      for (const [headers, details] of cases) {
        const r = await call(m.url, 'POST', '/api/v1/ingest', { body, headers: { 'content-type': 'application/json', ...headers } });
        assert.equal(r.status, 401);
        assert.equal(r.body.error, 'unauthorized');
        assert.match(r.body.details, details);
        assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="metrics"');
      }
      const bad = await call(m.url, 'POST', '/api/v1/ingest', { body: '{not json', headers: { 'content-type': 'application/json' } });
      assert.equal(bad.status, 401, 'auth comes before parsing');
      await m.deps.store.revokeToken(t.tokenId, NOW);
      const r = await ingest(m.url, t.token, makeReport({ ts: NOW }));
      assert.equal(r.status, 401);
      assert.match(r.body.details, /unknown or revoked/);
    });

    test('alerts are routed after the report is stored: 200 when all delivered, 202 with alertResults when one failed', async () => {
      const t = await m.newTenant();
      const disk = { name: 'DiskFilling', severity: 'warning', message: 'disk / at 91%' } as const;
      let r = await ingest(m.url, t.token, makeReport({ agentId: 'al', ts: NOW - 10_000, alerts: [disk] }));
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.alertResults, [{ alert: 'DiskFilling', route: 'chat', outcome: 'delivered', status: 200 }]);
      r = await ingest(m.url, t.token, makeReport({ agentId: 'al', ts: NOW, alerts: [disk, { name: 'HostDown', severity: 'critical' }] }));
      assert.equal(r.status, 202);
      assert.deepEqual(r.body.alertResults, [
        // Sent along with the new alert of its group (host al on route chat), as Alertmanager re-sends a group.
        { alert: 'DiskFilling', route: 'chat', outcome: 'delivered', status: 200 },
        { alert: 'HostDown', route: 'pager', outcome: 'failed', status: 500, error: 'receiver answered HTTP 500' },
        { alert: 'HostDown', route: 'chat', outcome: 'delivered', status: 200 },
      ]);
      const s = await call(m.url, 'GET', `/api/v1/host/al?from=${NOW - 10_000}&to=${NOW}`, { token: t.token });
      assert.deepEqual(s.body.timestamps, [NOW - 10_000, NOW], 'both reports are stored');
      const warning = m.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'alert delivery failed');
      assert.ok(warning, 'the failed delivery is logged for the operator');
      assert.deepEqual(warning.failures.map((f: { route: string }) => f.route), ['pager']);
      const again = await ingest(m.url, t.token, makeReport({ agentId: 'al', ts: NOW, alerts: [disk, { name: 'HostDown', severity: 'critical' }] }));
      assert.equal(again.status, 200);
      assert.deepEqual(again.body.alertResults, [], 'a duplicate is not routed again');
      const labels = (ok.bodies.at(-1) as { alerts: Array<{ labels: Record<string, string> }> }).alerts[0]!.labels;
      assert.equal(labels['host'], 'al');
    });
  });
}
