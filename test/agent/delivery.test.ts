import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync } from 'node:fs';
import { createHmac } from 'node:crypto';
import { backoffDelay, parseRetryAfter, MAX_RETRY_AFTER_MS } from '../../src/agent/delivery/backoff.js';
import { postReport } from '../../src/agent/delivery/post-report.js';
import { drainSpool, startDeliveryLoop } from '../../src/agent/delivery/delivery-loop.js';
import { Spool } from '../../src/agent/delivery/spool.js';
import { captureLog, tempDir, waitFor } from './agent-harness.js';

const dirs: string[] = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
function dir() { const d = tempDir(); dirs.push(d); return d; }

/** A local HTTP receiver answering from a script of (status, headers, body); records every request. */
async function receiver(script: { status: number; headers?: Record<string, string>; body?: string }[]) {
  const seen: { body: string; headers: http.IncomingHttpHeaders; url: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers, url: req.url ?? '' });
      const next = script.length > 1 ? script.shift()! : script[0]!;
      res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers }).end(next.body ?? '{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('backoff: full jitter below an exponentially growing ceiling, capped', () => {
  assert.equal(backoffDelay(1, 100, 10_000, () => 0.999), 99);
  assert.equal(backoffDelay(4, 100, 10_000, () => 0.5), 400);
  assert.equal(backoffDelay(40, 100, 10_000, () => 0.999), 9990);
  assert.equal(backoffDelay(3, 100, 10_000, () => 0), 0);
});

test('Retry-After as seconds or HTTP date, bounded; garbage ignored', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  assert.equal(parseRetryAfter('7', now), 7000);
  assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now), 30_000);
  assert.equal(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now), 0);
  assert.equal(parseRetryAfter('999999', now), MAX_RETRY_AFTER_MS);
  assert.equal(parseRetryAfter('soon', now), undefined);
  assert.equal(parseRetryAfter(undefined, now), undefined);
});

test('POST carries the bearer token and the HMAC of the exact body bytes, to /api/v1/ingest under the base path', async () => {
  const r = await receiver([{ status: 200 }]);
  try {
    const body = Buffer.from('{"a": 1,  "b":"ü"}');
    const out = await postReport({ url: `${r.url}/metrics`, token: 'tok', secret: 'k', timeoutMs: 2000 }, body);
    assert.equal(out.kind, 'delivered');
    assert.equal(r.seen[0]!.url, '/metrics/api/v1/ingest');
    assert.equal(r.seen[0]!.headers.authorization, 'Bearer tok');
    assert.equal(r.seen[0]!.headers['x-collector-signature'], `sha256=${createHmac('sha256', 'k').update(body).digest('hex')}`);
    assert.equal(r.seen[0]!.body, body.toString('utf8'));
  } finally { await r.close(); }
});

test('classifies answers: 2xx delivered, 5xx/429/408 retried with Retry-After, other 4xx rejected with the details, unreachable retried', async () => {
  const r = await receiver([
    { status: 202, body: '{"alertResults":[{"outcome":"failed"}]}' },
    { status: 503, body: '{"error":"unavailable","details":"db down"}' },
    { status: 429, headers: { 'retry-after': '3' }, body: '{"error":"rate_limited","retry_after":3}' },
    { status: 408 },
    { status: 413, body: '{"error":"payload_too_large","details":"body is over 1048576 bytes"}' },
    { status: 400, body: '<html>bad gateway config</html>' },
  ]);
  const t = { url: r.url, token: 't', timeoutMs: 2000 };
  const b = Buffer.from('{}');
  try {
    assert.deepEqual(await postReport(t, b), { kind: 'delivered', status: 202, alertResults: [{ outcome: 'failed' }] });
    const s503 = await postReport(t, b);
    assert.equal(s503.kind, 'retry');
    assert.match((s503 as { reason: string }).reason, /503 unavailable: db down/);
    assert.deepEqual(await postReport(t, b), { kind: 'retry', status: 429, reason: '429 rate_limited', retryAfterMs: 3000 });
    assert.equal((await postReport(t, b)).kind, 'retry');
    assert.deepEqual(await postReport(t, b), { kind: 'rejected', status: 413, error: 'payload_too_large', details: 'body is over 1048576 bytes' });
    assert.deepEqual(await postReport(t, b), { kind: 'rejected', status: 400, error: 'http_400', details: '<html>bad gateway config</html>' });
  } finally { await r.close(); }
  const down = await postReport(t, b);
  assert.equal(down.kind, 'retry');
  assert.match((down as { reason: string }).reason, /ECONN(REFUSED|RESET)/);
});

test('a service that never answers is a retry after the request timeout', async () => {
  const server = http.createServer(() => { /* never answers */ });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const out = await postReport({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't', timeoutMs: 200 }, Buffer.from('{}'));
    assert.equal(out.kind, 'retry');
    assert.match((out as { reason: string }).reason, /no answer within 200 ms/);
  } finally { server.closeAllConnections(); server.close(); }
});

test('delivery keeps the head report through 503 and 429 (honouring Retry-After), then sends the rest in order', async () => {
  const r = await receiver([{ status: 503 }, { status: 429, headers: { 'retry-after': '0' } }, { status: 200 }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 3; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const loop = startDeliveryLoop({ spool, log: cap.log, retryBaseMs: 5, retryMaxMs: 20, send: (b, s) => postReport({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  try {
    await waitFor('spool drained', () => spool.length === 0);
  } finally { await loop.stop(1000); await r.close(); }
  assert.deepEqual(r.seen.map((s) => JSON.parse(s.body).n), [1, 1, 1, 2, 3]);
  assert.equal(cap.find('metrics service reachable again, sending spooled reports').length, 1);
});

test('a rejected report is dropped and counted, the next one goes on', async () => {
  const r = await receiver([{ status: 422, body: '{"error":"limit_exceeded","details":"host has 1000 metric names"}' }, { status: 200 }]);
  const cap = captureLog();
  const d = dir();
  const spool = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  await spool.append(Buffer.from('{"n":1}'), Date.now());
  await spool.append(Buffer.from('{"n":2}'), Date.now());
  const ok = await drainSpool({ spool, log: cap.log, retryBaseMs: 5, retryMaxMs: 20, send: (b, s) => postReport({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  await r.close();
  assert.equal(ok, true);
  assert.equal(r.seen.length, 2);
  assert.deepEqual(cap.find('metrics service refused a report; not retrying it').map((l) => [l.status, l.error, l.details]), [[422, 'limit_exceeded', 'host has 1000 metric names']]);
  assert.equal((await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log })).counters.rejected, 1, 'counter survives a restart');
});

test('drainSpool stops at the first retryable failure and keeps everything spooled', async () => {
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  await spool.append(Buffer.from('{}'), Date.now());
  const ok = await drainSpool({ spool, log: cap.log, retryBaseMs: 5, retryMaxMs: 20, send: (b, s) => postReport({ url: 'http://127.0.0.1:1', token: 't', timeoutMs: 500 }, b, s) });
  assert.equal(ok, false);
  assert.equal(spool.length, 1);
});
