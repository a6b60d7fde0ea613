import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, type App } from '../../src/core/http/create-app.js';
import { SECURITY_HEADERS } from '../../src/core/http/security-headers.js';
import { rawExchange } from '../helpers/http.js';

const SHORT = { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300, checkIntervalMs: 50 };

async function build(): Promise<{ app: App; port: number }> {
  const app = createHttpApp({ name: 'test', logLevel: 'silent', bodyLimit: 1024, trustProxy: [], timeouts: SHORT });
  app.post('/echo', async (req) => req.body);
  app.get('/ok', async () => ({ ok: true }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, port: (app.server.address() as { port: number }).port };
}

interface Parsed { status: number; headers: Map<string, string>; body: unknown }

function parse(response: string): Parsed {
  const [head = '', body = ''] = response.split('\r\n\r\n', 2);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
}

function assertShape(p: Parsed, status: number, error: string, what: string): void {
  assert.equal(p.status, status, what);
  assert.match(p.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, `${what}: every response carries a request id`);
  for (const [h, v] of Object.entries(SECURITY_HEADERS)) assert.equal(p.headers.get(h), v, `${what}: ${h}`);
  assert.match(p.headers.get('content-type') ?? '', /^application\/json/, what);
  assert.equal(p.headers.get('connection'), 'close', what);
  const body = p.body as { error: string; details: string };
  assert.equal(body.error, error, what);
  assert.equal(typeof body.details, 'string', what);
  assert.deepEqual(Object.keys(body).sort(), ['details', 'error'], what);
}

test('requests Node\'s parser rejects get 400 with the security headers and the {error, details} body', async (t) => {
  const { app, port } = await build();
  t.after(() => app.close());
  const malformed = [
    'GARBAGE\r\n\r\n',
    'GET / HTTP/9.9\r\nHost: x\r\n\r\n',
    'GET /ok HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
    'GET /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
    'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n',
    'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    'GET /ok HTTP/1.1\r\nHost: x\r\nX: a\u0000b\r\n\r\n',
    'GET /ok HTTP/1.1\r\n\r\n',
  ];
  for (const request of malformed) assertShape(parse(await rawExchange(port, request)), 400, 'invalid_request', JSON.stringify(request));
});

test('headers past the size limit get 431 header_too_large in the same shape', async (t) => {
  const { app, port } = await build();
  t.after(() => app.close());
  const response = await rawExchange(port, `GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
  assertShape(parse(response), 431, 'header_too_large', 'oversized headers');
});

test('a client too slow with its headers or body gets 408 request_timeout in the same shape', { timeout: 10_000 }, async (t) => {
  const { app, port } = await build();
  t.after(() => app.close());
  assertShape(parse(await rawExchange(port, 'GET /ok HTTP/1.1\r\nHost: x\r\n')), 408, 'request_timeout', 'stalled headers');
  assertShape(parse(await rawExchange(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"n":')), 408, 'request_timeout', 'stalled body');
});

test('a well-formed request on the same server is answered normally', async (t) => {
  const { app, port } = await build();
  t.after(() => app.close());
  const response = await rawExchange(port, 'GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.match(response, /^HTTP\/1\.1 200/);
});

test('an Expect other than 100-continue gets 417 expectation_failed in the same shape, and 100-continue still works', async (t) => {
  const { app, port } = await build();
  t.after(() => app.close());
  const refused = parse(await rawExchange(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'));
  assertShape(refused, 417, 'expectation_failed', 'Expect: foo');
  const ok = await rawExchange(port, 'POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{"n":1}');
  assert.match(ok, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200/);
});
