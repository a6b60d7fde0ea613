import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createAlertRouter, incidentFingerprint, loadAlertRoutes, type AlertRoute } from '../../src/metrics/alerts/alert-router.js';
import { globMatches, routeMatches } from '../../src/metrics/alerts/alert-route.js';
import { buildWebhookPayload } from '../../src/metrics/alerts/webhook-payload.js';
import { Ajv } from 'ajv';
import { ALERT_LIMITS, AlertsSchema, type Alert } from '../../src/metrics/alerts/alert.js';
import { ConfigError } from '../../src/core/config.js';
import { createAlertStore, type AlertStore, type AlertTables, type NewAlert } from '../../src/metrics/alerts/alert-store.js';
import { countHostReportsAfter } from '../../src/metrics/storage/engine/reader.js';
import { databaseConn } from '../../src/metrics/storage/engine/sql-conn.js';
import { openMetricsDatabase } from '../../src/metrics/deps.js';
import type { TestContext } from 'node:test';

/** Router options over a fresh SQLite database (the notification state a router keeps between reports). */
async function routerOptions(t: TestContext, timeoutMs: number, now: () => number = Date.now) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'alerts-'));
  const database = await openMetricsDatabase({ databaseUrl: undefined, dbSchema: 'unused', dataDir });
  t.after(async () => { await database.close(); rmSync(dataDir, { recursive: true, force: true }); });
  return { timeoutMs, store: createAlertStore(database.db.withTables<AlertTables>(), databaseConn(database), countHostReportsAfter), now };
}

interface Received { headers: IncomingMessage['headers']; body: unknown }

/** A real HTTP receiver on an ephemeral loopback port; `answer` decides what it does with each POST. */
async function receiver(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${addr.port}/hook`,
    received,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const ctx = { tenantId: 'tenant-a', hostId: 'web-1', hostname: 'web-1', ts: Date.UTC(2026, 0, 2, 3, 4, 5) };
const cpu: Alert = { name: 'HighCpu', severity: 'critical', message: 'CPU above 95%', value: 97.5, threshold: 95, labels: { team: 'ops' } };
const disk: Alert = { name: 'DiskFilling', severity: 'warning', labels: { team: 'ops', mount: '/var' } };

test('delivers an Alertmanager v4 payload to a matching receiver and reports delivered', async (t) => {
  const ok = await receiver((_req, res) => res.writeHead(200).end('ok'));
  t.after(ok.close);
  const router = createAlertRouter([{ name: 'pager', url: ok.url, headers: { authorization: 'Bearer hook-secret' } }], await routerOptions(t, 2000));

  const results = await router.route(ctx, [cpu, disk]);

  assert.deepEqual(results, [
    { alert: 'HighCpu', route: 'pager', outcome: 'delivered', status: 200 },
    { alert: 'DiskFilling', route: 'pager', outcome: 'delivered', status: 200 },
  ]);
  assert.equal(ok.received.length, 1, 'alerts of one report for one route travel in one POST');
  const { headers, body } = ok.received[0]!;
  assert.equal(headers['content-type'], 'application/json');
  assert.equal(headers['authorization'], 'Bearer hook-secret');
  const p = body as ReturnType<typeof buildWebhookPayload>;
  assert.equal(p.version, '4');
  assert.equal(p.status, 'firing');
  assert.equal(p.receiver, 'pager');
  assert.deepEqual(p.groupLabels, { tenant: 'tenant-a', host: 'web-1' });
  assert.equal(p.groupKey, '{}:{host="web-1", tenant="tenant-a"}');
  assert.deepEqual(p.commonLabels, { team: 'ops', tenant: 'tenant-a', host: 'web-1', hostname: 'web-1' });
  assert.equal(p.alerts.length, 2);
  const first = p.alerts[0]!;
  assert.deepEqual(first.labels, { team: 'ops', alertname: 'HighCpu', severity: 'critical', tenant: 'tenant-a', host: 'web-1', hostname: 'web-1' });
  assert.deepEqual(first.annotations, { message: 'CPU above 95%', value: '97.5', threshold: '95' });
  assert.equal(first.status, 'firing');
  assert.equal(first.startsAt, '2026-01-02T03:04:05.000Z');
  assert.equal(first.endsAt, '0001-01-01T00:00:00Z');
  assert.match(first.fingerprint, /^[0-9a-f]{16}$/);
  assert.notEqual(first.fingerprint, p.alerts[1]!.fingerprint);
});

test('routes named like Object.prototype members (toString, constructor, __proto__) are notified of firing and resolved like any other', async (t) => {
  const ok = await receiver((_req, res) => res.writeHead(200).end('ok'));
  t.after(ok.close);
  const names = ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'pager'];
  const router = createAlertRouter(names.map((name) => ({ name, url: ok.url, group_wait: '0s', send_resolved: true })), await routerOptions(t, 2000));
  const firing = await router.route(ctx, [cpu]);
  assert.deepEqual(firing.map((r) => [r.route, r.outcome]).sort(), names.map((n) => [n, 'delivered']).sort());
  const resolved = await router.route({ ...ctx, ts: ctx.ts + 10_000 }, []);
  assert.deepEqual(resolved.map((r) => [r.route, r.outcome, r.resolved]).sort(), names.map((n) => [n, 'delivered', true]).sort());
  const received = ok.received.map((r) => { const p = r.body as { receiver: string; status: string }; return `${p.receiver} ${p.status}`; }).sort();
  assert.deepEqual(received, names.flatMap((n) => [`${n} firing`, `${n} resolved`]).sort());
});

test('a receiver answering 500 yields failed with its status; others still deliver', async (t) => {
  const ok = await receiver((_req, res) => res.writeHead(204).end());
  const broken = await receiver((_req, res) => res.writeHead(500).end('boom'));
  t.after(ok.close);
  t.after(broken.close);
  const router = createAlertRouter([
    { name: 'chat', url: ok.url },
    { name: 'ticketing', url: broken.url, match: { severity: ['critical'] } },
  ], await routerOptions(t, 2000));

  const results = await router.route(ctx, [cpu, disk]);

  assert.deepEqual(results, [
    { alert: 'HighCpu', route: 'chat', outcome: 'delivered', status: 204 },
    { alert: 'HighCpu', route: 'ticketing', outcome: 'failed', status: 500, error: 'receiver answered HTTP 500' },
    { alert: 'DiskFilling', route: 'chat', outcome: 'delivered', status: 204 },
  ]);
  assert.equal(broken.received.length, 1);
  assert.deepEqual((broken.received[0]!.body as { alerts: { labels: { alertname: string } }[] }).alerts.map((a) => a.labels.alertname), ['HighCpu']);
});

test('a receiver that never answers fails after the timeout instead of holding the ingest', async (t) => {
  const pending: ServerResponse[] = [];
  const hang = await receiver((_req, res) => { pending.push(res); });
  t.after(hang.close);
  const router = createAlertRouter([{ name: 'slow', url: hang.url }], await routerOptions(t, 400));

  const results = await router.route(ctx, [disk]);

  assert.deepEqual(results, [{ alert: 'DiskFilling', route: 'slow', outcome: 'failed', error: 'no answer within 400 ms' }]);
  // The receiver logs a request once its body has arrived; on a loaded machine that can trail the client's abort.
  for (let i = 0; i < 100 && hang.received.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(hang.received.length, 1, 'the request did reach the receiver');
});

test('a refused connection and a redirect are failures, and the webhook URL is never echoed', async (t) => {
  const gone = await receiver((_req, res) => res.end());
  await gone.close();
  const redirecting = await receiver((_req, res) => res.writeHead(302, { location: 'http://example.invalid/' }).end());
  t.after(redirecting.close);
  const router = createAlertRouter([
    { name: 'gone', url: `${gone.url}?token=s3cret` },
    { name: 'moved', url: redirecting.url },
  ], await routerOptions(t, 2000));

  const results = await router.route(ctx, [cpu]);

  assert.deepEqual(results, [
    { alert: 'HighCpu', route: 'gone', outcome: 'failed', error: 'connection failed (ECONNREFUSED)' },
    { alert: 'HighCpu', route: 'moved', outcome: 'failed', status: 302, error: 'receiver answered HTTP 302' },
  ]);
  assert.doesNotMatch(JSON.stringify(results), /s3cret|127\.0\.0\.1/);
});

test('no alerts, no routes or no matching route produce no results and no requests', async (t) => {
  const ok = await receiver((_req, res) => res.end());
  t.after(ok.close);
  assert.deepEqual(await createAlertRouter([{ name: 'r', url: ok.url }], await routerOptions(t, 1000)).route(ctx, []), []);
  assert.deepEqual(await createAlertRouter([], await routerOptions(t, 1000)).route(ctx, [cpu]), []);
  assert.deepEqual(await createAlertRouter([{ name: 'r', url: ok.url, match: { name: 'Mem*' } }], await routerOptions(t, 1000)).route(ctx, [cpu]), []);
  assert.equal(ok.received.length, 0);
});

test('agent labels cannot override the labels the service sets', () => {
  const forged: Alert = { name: 'X', severity: 'info', labels: { tenant: 'tenant-b', host: 'other', alertname: 'Y', severity: 'critical', hostname: 'h' } };
  const p = buildWebhookPayload('r', ctx, [{ alert: forged, startsAt: ctx.ts }]);
  assert.deepEqual(p.alerts[0]!.labels, { tenant: 'tenant-a', host: 'web-1', alertname: 'X', severity: 'info', hostname: 'web-1' });
});

test('route matching: severity list, anchored case-sensitive glob, both must hold', () => {
  const route = (match: AlertRoute['match']): AlertRoute => ({ name: 'r', url: 'http://x', ...(match ? { match } : {}) });
  assert.equal(routeMatches(route(undefined), cpu), true);
  assert.equal(routeMatches(route({ severity: ['warning', 'critical'] }), cpu), true);
  assert.equal(routeMatches(route({ severity: ['info'] }), cpu), false);
  assert.equal(routeMatches(route({ name: 'High*' }), cpu), true);
  assert.equal(routeMatches(route({ name: 'high*' }), cpu), false);
  assert.equal(routeMatches(route({ name: 'High*', severity: ['warning'] }), cpu), false);
  assert.equal(globMatches('Disk*', 'DiskFilling'), true);
  assert.equal(globMatches('*Fill*', 'DiskFilling'), true);
  assert.equal(globMatches('Disk', 'DiskFilling'), false, 'anchored at the end');
  assert.equal(globMatches('isk*', 'DiskFilling'), false, 'anchored at the start');
  assert.equal(globMatches('Cp?', 'Cpu'), true);
  assert.equal(globMatches('Cp?', 'Cpus'), false);
  assert.equal(globMatches('a.c', 'abc'), false, 'dots are literal, not regex');
  assert.equal(globMatches('*', ''), true);
  assert.equal(globMatches('Disk*', 'Disk*Full'), true, 'a * of the glob stays a wildcard where the name holds a *');
  assert.equal(globMatches('*', '*x'), true);
  assert.equal(globMatches('a*', 'a*b'), true);
  assert.equal(globMatches('a*c', 'a*b'), false);
  assert.equal(globMatches('*a*a*a*a*a*b', 'a'.repeat(5000)), false, 'no catastrophic backtracking');
});

function routesFile(t: { after: (fn: () => void) => void }, content: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fs-routes-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'routes.json');
  writeFileSync(file, content);
  return file;
}

test('loadAlertRoutes: no file option means no routes; a valid file loads', async (t) => {
  assert.deepEqual(await loadAlertRoutes(undefined), []);
  const routes = [{ name: 'pager', match: { severity: ['critical'], name: 'Disk*' }, url: 'https://hooks.example.com/x', headers: { Authorization: 'Bearer x' } }];
  assert.deepEqual(await loadAlertRoutes(routesFile(t, JSON.stringify({ routes }))), routes);
});

test('loadAlertRoutes lists every problem of an invalid file', async (t) => {
  const file = routesFile(t, JSON.stringify({
    routes: [
      { name: 'a', url: 'ftp://x.example.com/' },
      { name: 'a', url: 'not a url', match: { severity: ['fatal'] } },
      { name: 'b', url: 'http://x', headers: { 'Content-Type': 'text/plain' }, extra: 1 },
    ],
  }));
  await assert.rejects(loadAlertRoutes(file), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    const all = e.problems.join('\n');
    assert.match(all, /routes\.1\.match\.severity\.0: must be equal to one of the allowed values/);
    assert.match(all, /routes\.2\.extra: is not allowed/);
    return true;
  });
  const semantic = routesFile(t, JSON.stringify({
    routes: [
      { name: 'a', url: 'ftp://x.example.com/' },
      { name: 'a', url: 'not a url' },
      { name: 'b', url: 'http://x', headers: { 'Content-Type': 'text/plain', 'Keep-Alive': 'timeout=5', Upgrade: 'h2c', Expect: '100-continue', 'Content-Encoding': 'gzip' } },
    ],
  }));
  await assert.rejects(loadAlertRoutes(semantic), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    assert.deepEqual(e.problems, [
      `alert routes file ${semantic}: routes.0.url: must use http or https`,
      `alert routes file ${semantic}: routes.1.name: "a" is used by an earlier route`,
      `alert routes file ${semantic}: routes.1.url: is not a valid URL`,
      ...['Content-Type', 'Keep-Alive', 'Upgrade', 'Expect', 'Content-Encoding'].map((h) =>
        `alert routes file ${semantic}: routes.2.headers.${h}: is set by the service or refused by its HTTP client, and cannot be configured`),
    ]);
    return true;
  });
  // Header names ignore case: two spellings would reach the receiver as one header of both values; User-Agent is the service's.
  const spellings = routesFile(t, JSON.stringify({ routes: [{ name: 'c', url: 'http://x', headers: { Authorization: 'Bearer one', authorization: 'Bearer two', 'User-Agent': 'custom' } }] }));
  await assert.rejects(loadAlertRoutes(spellings), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    assert.deepEqual(e.problems, [
      `alert routes file ${spellings}: routes.0.headers.authorization: is another spelling of a header named before it (header names ignore case)`,
      `alert routes file ${spellings}: routes.0.headers.User-Agent: is set by the service or refused by its HTTP client, and cannot be configured`,
    ]);
    return true;
  });
});

test('loadAlertRoutes refuses a header value with CR/LF or another control character, or above U+00FF, at start', async (t) => {
  const file = routesFile(t, JSON.stringify({
    routes: [
      { name: 'crlf', url: 'http://x', headers: { Authorization: 'Bearer abc\r\nX-Injected: 1' } },
      { name: 'nul', url: 'http://x', headers: { 'X-A': 'a\u0000b', 'X-B': 'a\u0085b', 'X-C': 'a\u007fb' } },
      { name: 'wide', url: 'http://x', headers: { 'X-Euro': '5\u20ac' } },
      { name: 'fine', url: 'http://x', headers: { 'X-Tab': 'a\tb', 'X-Latin': 'caf\u00e9' } },
    ],
  }));
  await assert.rejects(loadAlertRoutes(file), (e: unknown) => {
    assert.ok(e instanceof ConfigError);
    assert.deepEqual(e.problems.map((p) => p.replace(`alert routes file ${file}: `, '').replace(/: the value may hold only .*$/, '')), [
      'routes.0.headers.Authorization', 'routes.1.headers.X-A', 'routes.1.headers.X-B', 'routes.1.headers.X-C', 'routes.2.headers.X-Euro',
    ]);
    assert.match(e.problems[0]!, /no CR, LF or other control character/);
    return true;
  });
});

test('loadAlertRoutes fails clearly on a missing file and on invalid JSON', async (t) => {
  await assert.rejects(loadAlertRoutes('/nonexistent/routes.json'), /alert routes file \/nonexistent\/routes\.json: does not exist/);
  await assert.rejects(loadAlertRoutes(routesFile(t, '{"routes": [')), /is not valid JSON/);
  await assert.rejects(loadAlertRoutes(routesFile(t, '[]')), /must be object/);
});

test('the alert schema accepts the documented shape and rejects out-of-bound alerts', () => {
  const validate = new Ajv({ strict: false }).compile(AlertsSchema);
  assert.equal(validate([cpu, disk, { name: 'Min', severity: 'info', extra: 'tolerated' }]), true);
  const tooManyLabels = Object.fromEntries(Array.from({ length: ALERT_LIMITS.maxLabels + 1 }, (_, i) => [`l${i}`, 'v']));
  const bad: unknown[] = [
    [{ severity: 'info' }],
    [{ name: '', severity: 'info' }],
    [{ name: 'x'.repeat(ALERT_LIMITS.nameLength + 1), severity: 'info' }],
    [{ name: 'A', severity: 'fatal' }],
    [{ name: 'A', severity: 'info', message: 'm'.repeat(ALERT_LIMITS.messageLength + 1) }],
    [{ name: 'A', severity: 'info', labels: { 'bad-name': 'v' } }],
    [{ name: 'A', severity: 'info', labels: { ok: 'v'.repeat(ALERT_LIMITS.labelValueLength + 1) } }],
    [{ name: 'A', severity: 'info', labels: { ok: 1 } }],
    [{ name: 'A', severity: 'info', labels: tooManyLabels }],
    [{ name: 'A', severity: 'info', value: '97' }],
    Array.from({ length: ALERT_LIMITS.maxAlerts + 1 }, () => disk),
  ];
  for (const alerts of bad) assert.equal(validate(alerts), false, JSON.stringify(alerts).slice(0, 120));
});

test('routeAll: a backlog of alert-free reports reads a quiet host\'s incidents once, and an older report clears nothing', async (t) => {
  const ok = await receiver((_req, res) => res.writeHead(200).end('ok'));
  t.after(ok.close);
  const options = await routerOptions(t, 2000, () => ctx.ts + 60 * 60_000);
  let reads = 0;
  const log: string[] = [];
  const firing = options.store.firing.bind(options.store);
  const forHost = options.store.forHost.bind(options.store);
  options.store.firing = (tenantId, hostId) => { reads++; log.push(`read ${hostId}`); return firing(tenantId, hostId); };
  options.store.forHost = (tenantId, hostId, fn) => { log.push('hold'); return forHost(tenantId, hostId, fn); };
  const router = createAlertRouter([{ name: 'pager', url: ok.url, group_wait: '0s', send_resolved: true }], options);
  const at = (s: number, host = 'web-1') => ({ ...ctx, hostId: host, hostname: host, ts: ctx.ts + s * 1000 });

  // The incident opens at +0 s and is last seen at +20 s; the backlog then brings reports from +10 s (older: it
  // resolves nothing) and +30 s (resolves it) without alerts, then more of them, which need no read.
  assert.equal((await router.routeAll([{ ctx: at(0), alerts: [cpu] }, { ctx: at(20), alerts: [cpu] }])).flat().length, 1);
  reads = 0;
  const answers = await router.routeAll([10, 30, 40, 50, 60].map((s) => ({ ctx: at(s), alerts: [] })));
  assert.deepEqual(answers.map((a) => a.map((r) => [r.alert, r.resolved])), [[], [['HighCpu', true]], [], [], []]);
  assert.equal(reads, 2, 'the +10 s report left the incident open, +30 s resolved it, the rest were skipped');
  const [incident] = await options.store.list(ctx.tenantId, { from: 0, to: Number.MAX_SAFE_INTEGER, limit: 10 });
  assert.equal(incident!.resolvedAt, at(30).ts);

  // Another host in the same batch keeps its own state, and an alert in the batch opens an incident again.
  reads = 0;
  log.length = 0;
  const mixed = await router.routeAll([
    { ctx: at(70), alerts: [] }, { ctx: at(70, 'web-2'), alerts: [] }, { ctx: at(80), alerts: [disk] },
    { ctx: at(90), alerts: [] }, { ctx: at(100), alerts: [] }, { ctx: at(80, 'web-2'), alerts: [] },
  ]);
  assert.deepEqual(mixed.map((a) => a.map((r) => [r.alert, r.resolved ?? false])), [[], [], [['DiskFilling', false]], [['DiskFilling', true]], [], []]);
  assert.equal(reads, 4, 'web-1 at +70 (a new batch), web-2 at +70, +80 (alerts), +90 (an incident was open); +100 and web-2 at +80 skipped');
  assert.deepEqual(log.slice(0, 2), ['read web-1', 'read web-2'], 'each host\'s first read is asked for before any report is routed (one statement)');
});

test('routeAll: a host\'s read asked for before a line that notified is asked again, so an incident opened meanwhile is seen', async (t) => {
  // The receiver holds web-1's notification until web-2's own report (another request) has opened an incident.
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => { release = resolve; });
  let first = true;
  const hook = await receiver((_req, res) => {
    if (!first) { res.writeHead(200).end('ok'); return; }
    first = false;
    void held.then(() => res.writeHead(200).end('ok'));
  });
  t.after(hook.close);
  const options = await routerOptions(t, 5000, () => ctx.ts + 60 * 60_000);
  const router = createAlertRouter([{ name: 'pager', url: hook.url, group_wait: '0s', send_resolved: true }], options);
  const at = (s: number, host: string) => ({ ...ctx, hostId: host, hostname: host, ts: ctx.ts + s * 1000 });

  const body = router.routeAll([{ ctx: at(0, 'web-1'), alerts: [cpu] }, { ctx: at(20, 'web-2'), alerts: [] }]);
  while (hook.received.length < 1) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal((await router.route(at(10, 'web-2'), [disk])).length, 1, 'web-2\'s incident opened while the body waits on its webhook');
  release();
  const answers = await body;
  assert.deepEqual(answers[1]!.map((r) => [r.alert, r.resolved]), [['DiskFilling', true]], 'web-2 at +20 s carries no alert: it resolves the incident opened at +10 s');
  assert.deepEqual(await options.store.firing(ctx.tenantId, 'web-2'), []);
});

/** The HighCpu incident of ctx's host as another instance left it in the store (`over`: its state). */
function storeCpuIncident(store: AlertStore, over: Partial<NewAlert>): Promise<number[]> {
  return store.forHost(ctx.tenantId, ctx.hostId, (host) => host.record({ opened: [{
    tenantId: ctx.tenantId, hostId: ctx.hostId, fingerprint: incidentFingerprint(cpu), name: cpu.name, severity: cpu.severity, labels: cpu.labels!,
    message: null, value: null, threshold: null, startsAt: ctx.ts, lastSeenAt: ctx.ts, resolvedAt: null, createdAt: ctx.ts, routes: {}, resolvePending: false,
    ...over,
  }], updated: [] }));
}

test('a notification claimed by another report is left to it; a claim its instance never finished expires and is sent again', async (t) => {
  const ok = await receiver((_req, res) => res.writeHead(200).end('ok'));
  t.after(ok.close);
  let now = ctx.ts + 60_000;
  const options = await routerOptions(t, 1000, () => now);
  const router = createAlertRouter([{ name: 'pager', url: ok.url }], options);
  await storeCpuIncident(options.store, { createdAt: now, routes: { pager: { notifiedAt: now, outcome: 'sending' } } });
  assert.deepEqual(await router.route({ ...ctx, ts: ctx.ts + 10_000 }, [cpu]), [], 'another report is sending it');
  now += 1000 + 30_000;
  assert.deepEqual(await router.route({ ...ctx, ts: ctx.ts + 20_000 }, [cpu]), [{ alert: 'HighCpu', route: 'pager', outcome: 'delivered', status: 200 }]);
  assert.equal(ok.received.length, 1);
  const [incident] = await options.store.firing(ctx.tenantId, ctx.hostId);
  assert.deepEqual({ ...incident!.routes }, { pager: { notifiedAt: now, outcome: 'delivered', status: 200, deliveredAt: now } });
});

test('a resolved notification claimed by an instance that stopped is sent again by a later report once the claim expires', async (t) => {
  const ok = await receiver((_req, res) => res.writeHead(200).end('ok'));
  t.after(ok.close);
  let now = ctx.ts + 60_000;
  const options = await routerOptions(t, 1000, () => now);
  const router = createAlertRouter([{ name: 'pager', url: ok.url }], options);
  await storeCpuIncident(options.store, {
    resolvedAt: ctx.ts + 10_000, createdAt: now, resolvePending: true,
    routes: { pager: { notifiedAt: now, outcome: 'delivered', deliveredAt: now, resolved: { at: now, outcome: 'sending' } } },
  });
  assert.deepEqual(await router.route({ ...ctx, ts: ctx.ts + 20_000 }, []), [], 'the claim is another report\'s while it lasts');
  assert.equal(ok.received.length, 0);
  now += 1000 + 30_000;
  assert.deepEqual(await router.route({ ...ctx, ts: ctx.ts + 30_000 }, []), [{ alert: 'HighCpu', route: 'pager', resolved: true, outcome: 'delivered', status: 200 }]);
  const payload = ok.received[0]!.body as ReturnType<typeof buildWebhookPayload>;
  assert.equal(payload.status, 'resolved');
  assert.equal(payload.alerts[0]!.endsAt, new Date(ctx.ts + 10_000).toISOString(), 'ends when the resolving report said, not at the retry');
  assert.deepEqual(await options.store.firing(ctx.tenantId, ctx.hostId), [], 'delivered: no longer read with the host\'s reports');
  assert.deepEqual(await router.route({ ...ctx, ts: ctx.ts + 40_000 }, []), []);
  assert.equal(ok.received.length, 1, 'sent once');
});

test('routeAll: a failed read fails the body with its error; the reads asked for ahead of the other hosts leave no unhandled rejection', async (t) => {
  const options = await routerOptions(t, 2000);
  options.store.firing = () => Promise.reject(new Error('database away'));
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  t.after(() => { process.off('unhandledRejection', onUnhandled); });
  const router = createAlertRouter([], options);
  const at = (host: string) => ({ ...ctx, hostId: host, hostname: host });
  await assert.rejects(router.routeAll([{ ctx: at('web-1'), alerts: [] }, { ctx: at('web-2'), alerts: [] }, { ctx: at('web-3'), alerts: [cpu] }]), /database away/);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(unhandled, []);
});
