import { test } from 'node:test';
import net from 'node:net';
import assert from 'node:assert/strict';
import { createHttpApp } from '../../src/core/http/create-app.js';
import { SECURITY_HEADERS } from '../../src/core/http/security-headers.js';
import { isRateLimitExempt } from '../../src/core/http/rate-limit-exempt.js';
import { registerHealth, type ReadinessCheck } from '../../src/core/ops/health.js';
import { databaseCheck, redisCheck } from '../../src/core/ops/readiness-checks.js';
import { openDatabase } from '../../src/core/storage/database.js';
import { connectRedis } from '../../src/core/redis/connect-redis.js';
import { BACKENDS, freshStorage } from '../helpers/backends.js';
import { REDIS_UP, TEST_REDIS_URL } from '../helpers/redis.js';
import { call, listen } from '../helpers/http.js';

function build(checks: Record<string, ReadinessCheck>, timeoutMs?: number) {
  const app = createHttpApp({ name: 'test', logLevel: 'silent', bodyLimit: 1024, trustProxy: [] });
  registerHealth(app, { checks, ...(timeoutMs ? { timeoutMs } : {}) });
  const exempt: Record<string, boolean> = {};
  app.addHook('onRequest', async (req) => { exempt[req.url] = isRateLimitExempt(req); });
  app.get('/other', async () => ({ ok: true }));
  return { app, exempt };
}

test('/healthz answers 200 without credentials, with the security headers and no cache', async (t) => {
  const { app } = build({ database: () => Promise.reject(new Error('down')) });
  t.after(() => app.close());
  const r = await app.inject({ url: '/healthz' });
  assert.equal(r.statusCode, 200);
  assert.deepEqual(r.json(), { status: 'ok' });
  assert.equal(r.headers['cache-control'], 'no-store');
  for (const [h, v] of Object.entries(SECURITY_HEADERS)) assert.equal(r.headers[h], v);
});

test('/readyz is 200 when every check passes and 503 when one fails, naming none of them', async (t) => {
  let dbUp = true;
  const { app } = build({ database: async () => { if (!dbUp) throw new Error('ECONNREFUSED 10.0.0.5:5432 password=x'); }, redis: async () => 'PONG' });
  t.after(() => app.close());
  let r = await app.inject({ url: '/readyz' });
  assert.equal(r.statusCode, 200);
  assert.deepEqual(r.json(), { status: 'ready' });
  dbUp = false;
  r = await app.inject({ url: '/readyz' });
  assert.equal(r.statusCode, 503);
  assert.deepEqual(r.json(), { error: 'unavailable', details: 'a dependency is unreachable' });
  assert.doesNotMatch(r.body, /database|redis|10\.0\.0\.5|password/);
});

test('/readyz answers 503 within its bound when a check hangs', async (t) => {
  const { app } = build({ redis: () => new Promise(() => undefined) }, 50);
  t.after(() => app.close());
  const r = await app.inject({ url: '/readyz' });
  assert.equal(r.statusCode, 503);
});

test('probes are marked exempt from rate limits; ordinary routes are not', async (t) => {
  const { app, exempt } = build({});
  t.after(() => app.close());
  await app.inject({ url: '/healthz' });
  await app.inject({ url: '/readyz' });
  await app.inject({ url: '/other' });
  await app.inject({ url: '/nope' });
  assert.deepEqual(exempt, { '/healthz': true, '/readyz': true, '/other': false, '/nope': false });
});

for (const backend of BACKENDS) {
  test(`databaseCheck passes on a live ${backend} database and fails once it is closed`, async (t) => {
    const storage = await freshStorage(backend);
    t.after(() => storage.cleanup());
    const database = await openDatabase({ databaseUrl: storage.databaseUrl, pgSchema: storage.pgSchema, dataDir: storage.dataDir, sqliteFile: 'h.db', migrations: () => ({}) });
    const check = databaseCheck(database.db);
    await check();
    await database.close();
    await assert.rejects(check());
  });
}

test('redisCheck passes on a live connection and fails on a closed one', { skip: !REDIS_UP }, async () => {
  const redis = await connectRedis(TEST_REDIS_URL, 'test-ready');
  const check = redisCheck(redis);
  await check();
  redis.disconnect();
  await assert.rejects(check());
});

test('over HTTP: no credentials needed, the JSON error shape on 503', async (t) => {
  const { app } = build({ database: async () => { throw new Error('x'); } });
  const base = await listen(app);
  t.after(() => app.close());
  const r = await call(base, 'GET', '/readyz');
  assert.equal(r.status, 503);
  assert.equal(r.body.error, 'unavailable');
});

test('once the instance is closing, a request on an open keep-alive connection gets a JSON 503 with Retry-After and the security headers', async () => {
  const { app } = build({});
  // Holds the close in its preClose phase (where, for example, feed sockets are being closed): the listener is still open.
  let release!: () => void;
  let inPreClose!: () => void;
  const preCloseEntered = new Promise<void>((resolve) => { inPreClose = resolve; });
  app.addHook('preClose', async () => { inPreClose(); await new Promise<void>((resolve) => { release = resolve; }); });
  const base = await listen(app);
  const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
  let received = '';
  const responses: Array<() => void> = [];
  socket.on('data', (c: Buffer) => { received += c.toString(); for (const r of responses.splice(0)) r(); });
  const nextData = () => new Promise<void>((resolve) => responses.push(resolve));
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await nextData();
  assert.match(received, /^HTTP\/1\.1 200/);
  received = '';
  const closing = app.close();
  await preCloseEntered;
  socket.write('GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n');
  await nextData();
  release();
  await closing;
  socket.destroy();
  assert.match(received, /^HTTP\/1\.1 503/);
  assert.match(received, /\{"error":"unavailable","details":"the server is shutting down; retry","retry_after":2\}/);
  assert.match(received, /retry-after: 2\r\n/i);
  assert.match(received, /connection: close/i);
  for (const [h, v] of Object.entries(SECURITY_HEADERS)) assert.ok(received.toLowerCase().includes(`${h}: ${v}`.toLowerCase()), h);
});
