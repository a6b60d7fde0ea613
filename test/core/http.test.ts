import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import { connect } from 'node:net';
import { once } from 'node:events';
import { Type } from 'typebox';
import { createHttpApp } from '../../src/core/http/create-app.js';
import { SECURITY_HEADERS } from '../../src/core/http/security-headers.js';
import { AppError } from '../../src/core/errors.js';

function build(timeouts = {}) {
  const lines: string[] = [];
  const logStream = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
  const app = createHttpApp({ name: 'test', logLevel: 'info', bodyLimit: 1024, trustProxy: [], logStream, timeouts });
  app.post('/echo', { schema: { body: Type.Object({ n: Type.Number(), nested: Type.Optional(Type.Object({ s: Type.String() })) }) } }, async (req) => req.body);
  app.get('/q', { schema: { querystring: Type.Object({ from: Type.Integer() }) } }, async (req) => ({ from: req.query.from }));
  app.get('/app-error', async () => { throw new AppError('rate_limited', 'slow down', { retry_after: 7 }); });
  app.get('/boom', async () => { throw new Error('secret internals'); });
  app.get('/busy', async () => { throw new AppError('unavailable', 'the server is busy; retry after 1 s', { retry_after: 1 }); });
  app.get('/internal-app-error', async () => { throw new AppError('internal', 'attachment 42 has no stored content', { path: '/var/lib/x' }); });
  return { app, lines };
}

test('security headers on success, error and 404', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  for (const url of ['/q?from=1', '/q?from=x', '/nope', '/boom']) {
    const r = await app.inject({ url });
    for (const [h, v] of Object.entries(SECURITY_HEADERS)) assert.equal(r.headers[h], v, `${url} ${h}`);
  }
});

test('HEAD of a route answering a stream gets its headers, and the stream is closed without a byte read', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  let pulled = 0;
  const streams: Readable[] = [];
  app.get('/file', async (_req, reply) => {
    const body = new Readable({ read() { pulled++; this.push(Buffer.alloc(1024)); if (pulled >= 64) this.push(null); } });
    streams.push(body);
    return reply.header('content-length', 64 * 1024).type('application/octet-stream').send(body);
  });
  const head = await app.inject({ method: 'HEAD', url: '/file' });
  assert.equal(head.statusCode, 200);
  assert.equal(head.headers['content-length'], String(64 * 1024));
  assert.equal(head.rawPayload.length, 0);
  assert.equal(pulled, 0, 'nothing was read');
  assert.equal(streams[0]!.destroyed, true, 'and the stream was closed');
  const get = await app.inject({ method: 'GET', url: '/file' });
  assert.equal(get.rawPayload.length, 64 * 1024);
});

test('validation errors name the field; bodies are not coerced, queries are', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  let r = await app.inject({ method: 'POST', url: '/echo', payload: { n: '5' } });
  assert.equal(r.statusCode, 400);
  assert.deepEqual(r.json(), { error: 'invalid_request', details: 'body n: must be number' });
  r = await app.inject({ method: 'POST', url: '/echo', payload: { n: 1, nested: {} } });
  assert.equal(r.json().details, 'body nested.s: is required');
  r = await app.inject({ url: '/q?from=12' });
  assert.deepEqual(r.json(), { from: 12 });
});

test('malformed JSON, wrong media type and oversize bodies get 400/415/413 JSON errors', async (t) => {
  const { app } = build();
  t.after(() => app.close());
  let r = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"n":' });
  assert.equal(r.statusCode, 400);
  assert.equal(r.json().error, 'invalid_request');
  r = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'text/plain' }, payload: 'hi' });
  assert.equal(r.statusCode, 415);
  assert.equal(r.json().error, 'unsupported_media_type');
  r = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ n: 1, pad: 'x'.repeat(2000) }) });
  assert.equal(r.statusCode, 413);
  assert.equal(r.json().error, 'payload_too_large');
});

test('AppError extras become body fields and Retry-After; 500s hide internals', async (t) => {
  const { app, lines } = build();
  t.after(() => app.close());
  let r = await app.inject({ url: '/app-error' });
  assert.equal(r.statusCode, 429);
  assert.deepEqual(r.json(), { error: 'rate_limited', details: 'slow down', retry_after: 7 });
  assert.equal(r.headers['retry-after'], '7');
  r = await app.inject({ url: '/boom' });
  assert.equal(r.statusCode, 500);
  assert.doesNotMatch(r.body, /secret internals|at /);
  assert.ok(lines.some((l) => l.includes('secret internals')), 'the 500 is logged');
  // An AppError of code internal is thrown with a message for the operator: the client gets the generic 500 body.
  r = await app.inject({ url: '/internal-app-error' });
  assert.equal(r.statusCode, 500);
  assert.deepEqual(r.json(), { error: 'internal', details: 'an unexpected error occurred; it has been logged' });
  assert.ok(lines.some((l) => l.includes('attachment 42 has no stored content')), 'its message is logged');
});

test('a 503 the service chose is one warn line with its details; a failure is an error line with its stack', async (t) => {
  const { app, lines } = build();
  t.after(() => app.close());
  assert.equal((await app.inject({ url: '/busy' })).statusCode, 503);
  assert.equal((await app.inject({ url: '/boom' })).statusCode, 500);
  const logged = lines.map((l) => JSON.parse(l) as { level: number; msg: string; details?: string; err?: { stack?: string } });
  const busy = logged.filter((l) => l.details === 'the server is busy; retry after 1 s' || l.err?.stack?.includes('the server is busy'));
  assert.deepEqual(busy.map((l) => [l.level, l.msg]), [[40, 'request rejected']]);
  const boom = logged.filter((l) => l.err?.stack?.includes('secret internals'));
  assert.deepEqual(boom.map((l) => [l.level, l.msg]), [[50, 'request failed']]);
});

test('logs never carry the authorization header or a token query parameter', async (t) => {
  const { app, lines } = build();
  t.after(() => app.close());
  await app.inject({ url: '/q?from=1&token=supersecret123', headers: { authorization: 'Bearer topsecret-bearer' } });
  const all = lines.join('');
  assert.ok(all.includes('[REDACTED]'));
  assert.doesNotMatch(all, /supersecret123|topsecret-bearer/);
});

/** Opens a raw TCP connection to `app`, writes `data`, and resolves with everything received once the server closes it. */
async function untilServerCloses(app: ReturnType<typeof build>['app'], data: string): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let received = '';
  socket.on('data', (c: Buffer) => { received += String(c); });
  socket.write(data);
  await once(socket, 'close');
  return received;
}

const SHORT = { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300, checkIntervalMs: 50 };

test('a client that stalls while sending headers is answered 408 and disconnected', { timeout: 10_000 }, async (t) => {
  const { app } = build(SHORT);
  t.after(() => app.close());
  const received = await untilServerCloses(app, 'GET /q?from=1 HTTP/1.1\r\nHost: x\r\n');
  assert.match(received, /^HTTP\/1\.1 408/);
});

test('a client that stalls while sending its body is answered 408 and disconnected', { timeout: 10_000 }, async (t) => {
  const { app } = build(SHORT);
  t.after(() => app.close());
  const received = await untilServerCloses(app, 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"n":');
  assert.match(received, /^HTTP\/1\.1 408/);
});

test('an idle keep-alive connection is closed after the keep-alive timeout', { timeout: 10_000 }, async (t) => {
  const { app } = build(SHORT);
  t.after(() => app.close());
  const received = await untilServerCloses(app, 'GET /q?from=1 HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.match(received, /^HTTP\/1\.1 200/);
  assert.match(received, /keep-alive/i);
});

test('closing does not wait for sockets that have not begun a request (a browser\'s preconnect, headers part-way); requests in flight, a router refusal included, are still answered and their sockets closed', { timeout: 20_000 }, async (t) => {
  // Before, each socket without a request held the close for the 60 s connection timeout; and a socket whose answer
  // went out while closing stayed for the keep-alive timeout, here longer than the test's own bound.
  const { app } = build({ keepAliveTimeoutMs: 60_000 });
  let release: (() => void) | undefined;
  app.get('/slow', async () => { await new Promise<void>((r) => { release = r; }); return { done: true }; });
  // A refusal by the router (a malformed escape) goes around the hooks, here held by an asynchronous limit.
  let releaseRefusal: (() => void) | undefined;
  app.refusedRequests.limit = () => new Promise<void>((r) => { releaseRefusal = r; });
  t.after(() => app.close());
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  const open = async (data?: string) => {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.on('data', (c: Buffer) => { received += String(c); });
    if (data) socket.write(data);
    return { socket, received: () => received };
  };
  const silent = await open();
  const partial = await open('GET /q?from=1 HTTP/1.1\r\nHost: x\r\n');
  const busy = await open('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
  const refused = await open('GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n');
  while (!release || !releaseRefusal) await new Promise((r) => setTimeout(r, 10));
  const closed = app.close();
  await Promise.all([once(silent.socket, 'close'), once(partial.socket, 'close')]);
  assert.equal(silent.received() + partial.received(), '', 'cut without an answer: no request had begun');
  assert.equal(busy.socket.destroyed || refused.socket.destroyed, false, 'the requests in flight keep their sockets');
  release();
  releaseRefusal();
  await Promise.all([once(busy.socket, 'close'), once(refused.socket, 'close')]);
  assert.match(busy.received(), /^HTTP\/1\.1 200[\s\S]*\{"done":true\}$/);
  assert.match(refused.received(), /^HTTP\/1\.1 400/);
  await closed;
});
