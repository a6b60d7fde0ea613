import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createHttpApp } from '../../src/core/http/create-app.js';
import { createSelfMetrics, exposeDiskGuard, registerSelfMonitoring } from '../../src/core/ops/self-metrics.js';
import { bindLogContext } from '../../src/core/http/log-context.js';
import { AppError } from '../../src/core/errors.js';

const TOKEN = 'metrics-token-0123456789abcdef';

function build(token: string | null = TOKEN) {
  const lines: string[] = [];
  const logStream = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
  const app = createHttpApp({ name: 'test', logLevel: 'info', bodyLimit: 1024, trustProxy: [], logStream });
  const metrics = createSelfMetrics('test');
  registerSelfMonitoring(app, metrics, { token: token ?? undefined });
  app.get('/api/item/:id', async (req, reply) => {
    bindLogContext(req, reply, { tenant: 'tenant-7' });
    req.log.info('looked up');
    return { ok: true };
  });
  return { app, metrics, lines };
}

/** The value of the sample `name` whose labels include `labels` (label order does not matter), or undefined. */
function sample(body: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of body.split('\n')) {
    const m = /^([a-z_:]+)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

const scrape = (app: ReturnType<typeof build>['app'], token = TOKEN) => app.inject({ url: '/metrics', headers: { authorization: `Bearer ${token}` } });

test('/metrics serves Prometheus text to the holder of the metrics token', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  const r = await scrape(app);
  assert.equal(r.statusCode, 200);
  assert.match(String(r.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  assert.match(r.body, /# TYPE http_requests_total counter/);
  assert.match(r.body, /# TYPE http_request_duration_seconds histogram/);
  assert.match(r.body, /process_resident_memory_bytes\{service="test"\}/);
});

test('/metrics refuses a missing or wrong token with 401 JSON', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  for (const headers of [{}, { authorization: `Bearer ${TOKEN}x` }, { authorization: 'Bearer short' }, { authorization: TOKEN }]) {
    const r = await app.inject({ url: '/metrics', headers });
    assert.equal(r.statusCode, 401);
    assert.equal(r.json().error, 'unauthorized');
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="metrics"', 'says how to authenticate, as every 401 of the API');
    assert.doesNotMatch(r.body, /http_requests_total/);
  }
});

test('without a configured token /metrics is not served at all', async (t) => {
  const { app } = build(null);
  t.after(() => app.close());
  const r = await app.inject({ url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(r.statusCode, 404);
});

test('requests are counted by route pattern and status, never by raw URL', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  await app.inject({ url: '/api/item/123' });
  await app.inject({ url: '/api/item/456' });
  await app.inject({ url: '/no/such/secret-path' });
  const body = (await scrape(app)).body;
  assert.equal(sample(body, 'http_requests_total', { method: 'GET', route: '/api/item/:id', status: '200', service: 'test' }), 2);
  assert.equal(sample(body, 'http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }), 1);
  assert.equal(sample(body, 'http_request_duration_seconds_count', { route: '/api/item/:id', status: '200' }), 2);
  assert.doesNotMatch(body, /route="[^"]*(123|456|secret-path)/);
});

test('service counters and gauges appear in the same registry; two apps never share counts', async (t) => {
  const one = build();
  const two = build();
  t.after(() => Promise.all([one.app.close(), two.app.close()]));
  const pushes = one.metrics.counter('sync_pushes_total', 'Pushes applied.', ['outcome']);
  const feeds = one.metrics.gauge('sync_feed_connections', 'Open feed sockets.');
  pushes.inc({ outcome: 'ok' }, 3);
  feeds.inc();
  const body = (await scrape(one.app)).body;
  assert.equal(sample(body, 'sync_pushes_total', { outcome: 'ok', service: 'test' }), 3);
  assert.equal(sample(body, 'sync_feed_connections', { service: 'test' }), 1);
  const other = (await scrape(two.app)).body;
  assert.doesNotMatch(other, /sync_pushes_total/);
});

test('every 429 counts as a rate-limit rejection of its route', async (t) => {
  const { app, metrics } = build();
  t.after(() => app.close());
  app.get('/limited/:id', async () => { throw new AppError('rate_limited', 'slow down', { retry_after: 3 }); });
  await app.inject({ url: '/limited/1' });
  await app.inject({ url: '/limited/2' });
  await app.inject({ url: '/api/item/1' });
  const body = (await scrape(app)).body;
  assert.equal(sample(body, 'rate_limit_rejections_total', { route: '/limited/:id' }), 2);
  assert.equal(sample(body, 'rate_limit_rejections_total', { route: '/api/item/:id' }), undefined);
  assert.ok(metrics.registry.getSingleMetric('rate_limit_rejections_total'));
});

test('every log line of a request carries its request id; bound tenant reaches the completion line; tokens never', async (t) => {
  const { app, lines } = build();
  t.after(() => app.close());
  const r = await app.inject({ url: '/api/item/9?token=querysecret-abc', headers: { authorization: 'Bearer bearersecret-xyz' } });
  await scrape(app);
  const reqId = r.headers['x-request-id'];
  const mine = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['reqId'] === reqId);
  assert.deepEqual(mine.map((l) => l['msg']), ['looked up', 'request completed'], 'at info: the handler\'s line and one line for the request ("incoming request" is debug)');
  const handler = mine.find((l) => l['msg'] === 'looked up');
  const completed = mine.find((l) => l['msg'] === 'request completed');
  assert.deepEqual([completed?.['method'], completed?.['route'], completed?.['status'], typeof completed?.['durationMs']], ['GET', '/api/item/:id', 200, 'number']);
  assert.match(String(completed?.['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'ISO time, as the agent logs');
  assert.equal(handler?.['tenant'], 'tenant-7');
  assert.equal(completed?.['tenant'], 'tenant-7');
  const all = lines.join('');
  for (const line of lines) assert.ok('reqId' in JSON.parse(line) || !/request/.test(line), line);
  assert.doesNotMatch(all, /querysecret-abc|bearersecret-xyz|metrics-token-0123/);
});

test('a request the router refuses before any hook (a malformed escape) is counted as unmatched, like an unknown route', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  assert.equal((await app.inject({ url: '/api/item/%ZZ' })).statusCode, 400);
  assert.equal((await app.inject({ url: '/api/item/%ZZ' })).statusCode, 400);
  assert.equal((await app.inject({ url: '/nope' })).statusCode, 404);
  const body = (await scrape(app)).body;
  assert.equal(sample(body, 'http_requests_total', { method: 'GET', route: 'unmatched', status: '400' }), 2);
  assert.equal(sample(body, 'http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }), 1);
  assert.equal(sample(body, 'http_request_duration_seconds_count', { method: 'GET', route: 'unmatched', status: '400' }), 2);
});

test('the free-space floor is on /metrics: free bytes of each watched directory, and 1 while writes are refused for want of space', async (t) => {
  const { app, metrics } = build();
  t.after(() => app.close());
  const floor = 64_000_000;
  let readings = [{ dir: '/data', freeBytes: 1_000_000 }, { dir: '/attachments', freeBytes: 900_000_000 }];
  exposeDiskGuard(metrics, { readings: () => readings, paused: () => readings.some((r) => r.freeBytes < floor) });
  let body = (await scrape(app)).body;
  assert.equal(sample(body, 'storage_free_bytes', { service: 'test', dir: '/data' }), 1_000_000);
  assert.equal(sample(body, 'storage_free_bytes', { service: 'test', dir: '/attachments' }), 900_000_000);
  assert.equal(sample(body, 'storage_writes_refused', { service: 'test' }), 1);
  readings = [{ dir: '/data', freeBytes: 80_000_000 }];
  body = (await scrape(app)).body;
  assert.equal(sample(body, 'storage_writes_refused', { service: 'test' }), 0);
  assert.equal(sample(body, 'storage_free_bytes', { service: 'test', dir: '/attachments' }), undefined, 'read at each scrape: a directory no longer watched is gone');
});
