import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createHmac, randomBytes } from 'node:crypto';
import { backoffDelay, parseRetryAfter, MAX_RETRY_AFTER_MS } from '../../src/agent/delivery/backoff.js';
import { encodeBatch, type EncodedBatch } from '../../src/agent/delivery/encode-batch.js';
import { sendBatch, type PostTarget } from '../../src/agent/delivery/post-batch.js';
import { gunzipSync, gzipSync } from 'node:zlib';
import { drainSpool, startDeliveryLoop } from '../../src/agent/delivery/delivery-loop.js';
import { Spool } from '../../src/agent/delivery/spool.js';
import { captureLog, tempDir, waitFor } from './agent-harness.js';

const dirs: string[] = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
function dir() { const d = tempDir(); dirs.push(d); return d; }

/** A local HTTP receiver answering from a script of (status, headers, body); records every request. */
async function receiver(script: { status: number; headers?: Record<string, string>; body?: string }[]) {
  const seen: { body: string; raw: Buffer; headers: http.IncomingHttpHeaders; url: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const text = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw).toString('utf8') : raw.toString('utf8');
      seen.push({ body: text, raw, headers: req.headers, url: req.url ?? '' });
      const next = script.length > 1 ? script.shift()! : script[0]!;
      // A 2xx without a scripted body answers like the service: every line stored.
      const body = next.body ?? (next.status < 300 ? JSON.stringify({ results: text.split('\n').filter(Boolean).map((_, i) => ({ line: i + 1, status: 'stored' })) }) : '{}');
      res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers }).end(body);
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

const lines = (body: string) => body.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { n: number });
/** Encodes and sends reports as the delivery loop does. */
const postBatch = async (t: PostTarget, reports: Buffer[]) => sendBatch(t, await encodeBatch(reports));
const FAST = { retryBaseMs: 5, retryMaxMs: 20, batchMaxReports: 1000, batchMaxBytes: 1e6 };

test('a batch is gzip-compressed NDJSON to /api/v1/ingest/bulk under the base path, with the bearer token and the HMAC of the bytes as sent', async () => {
  const r = await receiver([{ status: 200 }]);
  try {
    const bodies = [Buffer.from('{"a": 1,  "b":"ü"}'), Buffer.from('{\n  "pretty": true\n}')];
    const out = await postBatch({ url: `${r.url}/metrics`, token: 'tok', secret: 'k', timeoutMs: 2000 }, bodies);
    assert.equal(out.kind, 'answered');
    const seen = r.seen[0]!;
    assert.equal(seen.url, '/metrics/api/v1/ingest/bulk');
    assert.equal(seen.headers.authorization, 'Bearer tok');
    assert.equal(seen.headers['content-type'], 'application/x-ndjson');
    assert.equal(seen.headers['content-encoding'], 'gzip');
    assert.equal(seen.headers['x-collector-signature'], `sha256=${createHmac('sha256', 'k').update(seen.raw).digest('hex')}`);
    assert.equal(seen.body, '{"a": 1,  "b":"ü"}\n{"pretty":true}\n', 'exact spooled bytes, one report per line');
  } finally { await r.close(); }
});

test('classifies answers: 2xx with one result per line, 413 too large, 5xx/404/429/408 retried with Retry-After, other 4xx rejected, unreachable retried', async () => {
  const r = await receiver([
    { status: 202, body: '{"results":[{"line":1,"status":"stored","alertResults":[{"outcome":"failed"}]}]}' },
    { status: 200, body: '{"results":[]}' },
    { status: 503, body: '{"error":"unavailable","details":"db down"}' },
    { status: 429, headers: { 'retry-after': '3' }, body: '{"error":"rate_limited","retry_after":3}' },
    { status: 408 },
    // 404 for the bulk endpoint, then for the single one: a wrong base path.
    { status: 404, body: '{"error":"not_found"}' },
    { status: 404, body: '{"error":"not_found"}' },
    { status: 413, body: '{"error":"payload_too_large","details":"body is over 1048576 bytes"}' },
    { status: 401, body: '{"error":"unauthorized","details":"unknown or revoked token"}' },
    { status: 400, body: '<html>bad gateway config</html>' },
  ]);
  const t = { url: r.url, token: 't', timeoutMs: 2000 };
  const b = [Buffer.from('{}')];
  try {
    assert.deepEqual(await postBatch(t, b), { kind: 'answered', status: 202, lines: [{ line: 1, status: 'stored', alertResults: [{ outcome: 'failed' }] }] });
    assert.equal((await postBatch(t, b)).kind, 'retry', 'a 2xx without one result per report removes nothing');
    const s503 = await postBatch(t, b);
    assert.equal(s503.kind, 'retry');
    assert.match((s503 as { reason: string }).reason, /503 unavailable: db down/);
    assert.deepEqual(await postBatch(t, b), { kind: 'retry', status: 429, reason: '429 rate_limited', retryAfterMs: 3000 });
    assert.equal((await postBatch(t, b)).kind, 'retry');
    assert.equal((await postBatch(t, b)).kind, 'retry', 'a 404 for both endpoints (a wrong path) keeps the reports');
    assert.deepEqual(await postBatch(t, b), { kind: 'too_large', status: 413, details: 'body is over 1048576 bytes' });
    assert.deepEqual(await postBatch(t, b), { kind: 'rejected', status: 401, error: 'unauthorized', details: 'unknown or revoked token' });
    assert.deepEqual(await postBatch(t, b), { kind: 'rejected', status: 400, error: 'http_400', details: '<html>bad gateway config</html>' });
  } finally { await r.close(); }
  const down = await postBatch(t, b);
  assert.equal(down.kind, 'retry');
  assert.match((down as { reason: string }).reason, /ECONN(REFUSED|RESET)/);
});

test('a service without the bulk endpoint (only the specification\'s POST /api/v1/ingest) gets each report on its own, in order, signed; later batches skip the bulk attempt', async () => {
  const seen: Array<{ url: string; body: string; signature: string | undefined }> = [];
  let stored = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ url: req.url ?? '', body, signature: req.headers['x-collector-signature'] as string | undefined });
      if (req.url !== '/api/v1/ingest') { res.writeHead(404).end('{"error":"not_found"}'); return; }
      const report = JSON.parse(body) as { n: number };
      if (report.n === 2) { res.writeHead(400).end('{"error":"invalid_request","details":"body/cpu/usage: must be <= 100"}'); return; }
      const duplicate = report.n === 3;
      if (!duplicate) stored++;
      res.writeHead(report.n === 4 ? 202 : 200).end(JSON.stringify({ hostId: 'h', ts: report.n, metrics: 1, duplicate, alertResults: [] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const t = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't', secret: 'k', timeoutMs: 2000 };
  try {
    const first = await postBatch(t, [1, 2, 3, 4].map((n) => Buffer.from(JSON.stringify({ n }))));
    assert.deepEqual(first, { kind: 'answered', status: 202, lines: [
      { status: 'stored', alertResults: [] },
      { status: 'rejected', error: 'invalid_request', details: 'body/cpu/usage: must be <= 100' },
      { status: 'duplicate', alertResults: [] },
      { status: 'stored', alertResults: [] },
    ] });
    assert.deepEqual(seen.map((x) => x.url), ['/api/v1/ingest/bulk', '/api/v1/ingest', '/api/v1/ingest', '/api/v1/ingest', '/api/v1/ingest']);
    for (const x of seen.slice(1)) assert.equal(x.signature, `sha256=${createHmac('sha256', 'k').update(x.body).digest('hex')}`, 'each report signed over its own bytes');
    assert.equal(stored, 2);
    const second = await postBatch(t, [Buffer.from('{"n":5}')]);
    assert.deepEqual(second, { kind: 'answered', status: 200, lines: [{ status: 'stored', alertResults: [] }] });
    assert.deepEqual(seen.slice(5).map((x) => x.url), ['/api/v1/ingest'], 'no bulk attempt while the service is known to lack it');
  } finally { await new Promise<void>((r) => server.close(() => r())); }
});

test('report by report, a failure to retry stops the batch (sent again whole, the stored part answered duplicate) and a refused token refuses it', async () => {
  const stored = new Set<number>();
  let busy = 1;
  let token = 'good';
  const urls: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      urls.push(req.url ?? '');
      if (req.url !== '/api/v1/ingest') { res.writeHead(404).end('{"error":"not_found"}'); return; }
      if (req.headers.authorization !== `Bearer ${token}`) { res.writeHead(401).end('{"error":"unauthorized","details":"unknown or revoked token"}'); return; }
      const { n } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { n: number };
      if (n === 2 && busy-- > 0) { res.writeHead(503, { 'retry-after': '2' }).end('{"error":"unavailable","details":"busy"}'); return; }
      const duplicate = stored.has(n);
      stored.add(n);
      res.writeHead(200).end(JSON.stringify({ hostId: 'h', ts: n, metrics: 1, duplicate, alertResults: [] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const reports = [1, 2, 3].map((n) => Buffer.from(JSON.stringify({ n })));
  try {
    const first = await postBatch({ url, token: 'good', timeoutMs: 2000 }, reports);
    assert.deepEqual(first, { kind: 'retry', status: 503, reason: '503 unavailable: busy', retryAfterMs: 2000 });
    assert.deepEqual([...stored], [1], 'stopped at the report to retry');
    const again = await postBatch({ url, token: 'good', timeoutMs: 2000 }, reports);
    assert.deepEqual(again, { kind: 'answered', status: 200, lines: [
      { status: 'duplicate', alertResults: [] }, { status: 'stored', alertResults: [] }, { status: 'stored', alertResults: [] },
    ] });
    token = 'rotated';
    assert.deepEqual(await postBatch({ url, token: 'good', timeoutMs: 2000 }, reports.slice(0, 1)),
      { kind: 'rejected', status: 401, error: 'unauthorized', details: 'unknown or revoked token' });
    assert.equal(urls.filter((u) => u.endsWith('/bulk')).length, 1, 'the bulk endpoint was tried once');
  } finally { await new Promise<void>((r) => server.close(() => r())); }
});

test('a redirect (an http URL behind a balancer that sends it to https) keeps the backlog spooled and says where it points', async () => {
  const r = await receiver([{ status: 301, headers: { location: 'https://metrics.example.com/api/v1/ingest/bulk' } }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 3; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const summary = await drainSpool({ spool, log: cap.log, ...FAST, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  await r.close();
  assert.deepEqual(summary.rejected, []);
  assert.equal(summary.spooled, 3);
  assert.equal(spool.counters.rejected, 0);
  const [warning] = cap.find('metrics service unavailable, reports stay spooled');
  assert.equal(warning?.status, 301);
  assert.match(String(warning?.reason), /301 redirect to https:\/\/metrics\.example\.com\/api\/v1\/ingest\/bulk/);
});

test('a service that never answers is a retry after the request timeout', async () => {
  const server = http.createServer(() => { /* never answers */ });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const out = await postBatch({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't', timeoutMs: 200 }, [Buffer.from('{}')]);
    assert.equal(out.kind, 'retry');
    assert.match((out as { reason: string }).reason, /no answer within 200 ms/);
  } finally { server.closeAllConnections(); server.close(); }
});

test('an answer trickling in byte by byte is cut at the request timeout and retried, though no gap between bytes reaches it', async () => {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // A space every 20 ms for 3 s, then a valid answer: only a bound on the whole exchange cuts it before the end.
      const drip = setInterval(() => res.write(' '), 20);
      const end = setTimeout(() => { clearInterval(drip); res.end('{"results":[{"line":1,"status":"stored"}]}'); }, 3000);
      res.on('close', () => { clearInterval(drip); clearTimeout(end); });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const out = await postBatch({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't', timeoutMs: 300 }, [Buffer.from('{}')]);
    assert.deepEqual(out, { kind: 'retry', reason: 'no answer within 300 ms', timedOut: true });
  } finally { server.closeAllConnections(); server.close(); }
});

test('an upload slower than the request timeout completes while it moves: the timeout bounds each pause in it, and the wait for the answer', async () => {
  const server = http.createServer((req, res) => {
    // Takes what the link delivers in pieces, a few ms apart: the body, larger than the sockets' buffers (about 4 MiB
    // on loopback), arrives over seconds while the gap between pieces stays far below the timeout.
    req.on('data', () => { req.pause(); setTimeout(() => req.resume(), 5); });
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[{"line":1,"status":"stored"}]}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const started = Date.now();
    const out = await sendBatch({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't', timeoutMs: 1200 }, { body: randomBytes(32 * 1024 * 1024), reports: 1 });
    assert.deepEqual(out, { kind: 'answered', status: 200, lines: [{ line: 1, status: 'stored' }] });
    assert.ok(Date.now() - started > 1200, 'the upload took longer than the timeout (else this test proves nothing)');
  } finally { server.closeAllConnections(); server.close(); }
});

test('a batch that gets no answer in time is sent again at half the size at once, and doubles back after eight full batches answered', async () => {
  // A link that carries two reports within the timeout: a larger batch is never answered.
  const seen: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const sent = gunzipSync(Buffer.concat(chunks)).toString('utf8').split('\n').filter(Boolean);
      seen.push(sent.length);
      if (sent.length > 2) return;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: sent.map((_, i) => ({ line: i + 1, status: 'stored' })) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 24; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const summary = await drainSpool({ spool, log: cap.log, ...FAST, batchMaxReports: 8, send: (b, s) => sendBatch({ url, token: 't', timeoutMs: 200 }, b, s) });
    assert.deepEqual(summary, { delivered: 24, rejected: [], unsendable: [], spooled: 0 });
  } finally { server.closeAllConnections(); server.close(); }
  // The ninth batch of two was read ahead while the eighth was in flight, before the size doubled.
  assert.deepEqual(seen, [8, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 2, 2, 2]);
  assert.deepEqual(cap.find('metrics service gave no answer in time for a batch, sending smaller ones').map((l) => [l.reports, l.nextBatch]), [[8, 4], [4, 2], [4, 2]]);
});

test('delivery keeps the head batch through 503 and 429 (honouring Retry-After), then sends everything in order', async () => {
  const r = await receiver([{ status: 503 }, { status: 429, headers: { 'retry-after': '0' } }, { status: 200 }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 3; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const loop = startDeliveryLoop({ spool, log: cap.log, ...FAST, batchMaxReports: 2, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  try {
    await waitFor('spool drained', () => spool.length === 0);
  } finally { await loop.stop(1000); await r.close(); }
  assert.deepEqual(r.seen.map((s) => lines(s.body).map((l) => l.n)), [[1, 2], [1, 2], [1, 2], [3]]);
  assert.equal(cap.find('metrics service reachable again, sending spooled reports').length, 1);
});

test('a Retry-After of 0 or a date already past waits the normal backoff; a longer one is honoured', async () => {
  const past = new Date(Date.now() - 30_000).toUTCString();
  const r = await receiver([{ status: 503, headers: { 'retry-after': '0' } }, { status: 503, headers: { 'retry-after': past } }, { status: 429, headers: { 'retry-after': '3' } }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  await spool.append(Buffer.from('{"n":1}'), Date.now());
  // Each drain makes one attempt (its first failure, logged with the wait); random 0.5 of a 1 s ceiling is 500 ms.
  const opts = { spool, log: cap.log, ...FAST, retryBaseMs: 1000, retryMaxMs: 60_000, random: () => 0.5, send: (b: EncodedBatch, s: AbortSignal) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) };
  for (let i = 0; i < 3; i++) await drainSpool(opts);
  await r.close();
  assert.deepEqual(cap.find('metrics service unavailable, reports stay spooled').map((l) => [l.status, l.retryInMs]), [[503, 500], [503, 500], [429, 3000]]);
});

test('a backlog goes in batches of at most batchMaxReports and batchMaxBytes, oldest first, each report once', async () => {
  const r = await receiver([{ status: 200 }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e7, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 25; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const summary = await drainSpool({ spool, log: cap.log, ...FAST, batchMaxReports: 10, batchMaxBytes: 80, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  await r.close();
  assert.deepEqual(summary, { delivered: 25, rejected: [], unsendable: [], spooled: 0 });
  const sent = r.seen.map((s) => lines(s.body).map((l) => l.n));
  assert.ok(sent.every((b) => b.length <= 10 && b.length >= 1));
  assert.ok(sent.every((b) => b.length === 1 || b.reduce((n, x) => n + JSON.stringify({ n: x }).length, 0) <= 80), 'byte bound');
  assert.deepEqual(sent.flat(), Array.from({ length: 25 }, (_, i) => i + 1));
});

test('a batch answered 413 is split until it fits; a single report still too large is dropped and counted', async () => {
  const r = await receiver([{ status: 413 }, { status: 413 }, { status: 200 }, { status: 200 }, { status: 200 }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 4; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const summary = await drainSpool({ spool, log: cap.log, ...FAST, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  await r.close();
  assert.deepEqual(r.seen.map((s) => lines(s.body).length), [4, 2, 1, 1, 1, 1].slice(0, r.seen.length));
  assert.equal(summary.delivered, 4);
  const one = await receiver([{ status: 413, body: '{"error":"payload_too_large","details":"too big"}' }]);
  await spool.append(Buffer.from('{"n":5}'), Date.now());
  const s2 = await drainSpool({ spool, log: cap.log, ...FAST, send: (b, s) => sendBatch({ url: one.url, token: 't', timeoutMs: 2000 }, b, s) });
  await one.close();
  assert.deepEqual(s2.rejected, [{ status: 413, error: 'payload_too_large', details: 'too big' }]);
  assert.equal(spool.counters.rejected, 1);
});

test('lines the service rejects are dropped and counted, the others of the batch are delivered', async () => {
  const r = await receiver([{ status: 200, body: JSON.stringify({ results: [
    { line: 1, status: 'rejected', error: 'limit_exceeded', details: 'host has 1000 metric names' }, { line: 2, status: 'duplicate' }, { line: 3, status: 'stored' },
  ] }) }]);
  const cap = captureLog();
  const d = dir();
  const spool = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 3; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const summary = await drainSpool({ spool, log: cap.log, ...FAST, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  await r.close();
  assert.deepEqual(summary, { delivered: 2, rejected: [{ status: 422, error: 'limit_exceeded', details: 'host has 1000 metric names' }], unsendable: [], spooled: 0 });
  assert.equal(r.seen.length, 1);
  assert.deepEqual(cap.find('metrics service refused a report; not retrying it').map((l) => [l.error, l.details, l.reports]), [['limit_exceeded', 'host has 1000 metric names', 1]]);
  assert.equal((await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log })).counters.rejected, 1, 'counter survives a restart');
});

test('a spooled report whose file was removed, blanked or damaged is dropped and counted; the rest are delivered in order', async () => {
  const r = await receiver([{ status: 200 }]);
  const cap = captureLog();
  const d = dir();
  const spool = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 6; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  const file = (n: number) => path.join(d, readdirSync(d).filter((f) => f.startsWith('r-')).sort()[n - 1]!);
  // Each of these once stopped delivery for good: a missing file (read error), a blank one (the service skips the
  // line, so the answer had a result too few), also one blank only as the service's trim sees it (a form feed, NBSP,
  // U+2028, a BOM), and a torn one of two lines (re-serializing it threw).
  const [missing, blank, torn, odd] = [file(1), file(3), file(4), file(5)];
  unlinkSync(missing);
  writeFileSync(blank, ' \n');
  writeFileSync(torn, '{"n":\n');
  writeFileSync(odd, '\f\u00a0\u2028\ufeff');
  const summary = await drainSpool({ spool, log: cap.log, ...FAST, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s) });
  await r.close();
  assert.equal(summary.delivered, 2);
  assert.deepEqual(summary.unsendable.map((x) => x.replace(/^spooled report \d+: /, '')), [
    'its file cannot be read (ENOENT)', 'its file is blank', 'its file is not one JSON document', 'its file is blank',
  ]);
  assert.deepEqual(summary.rejected, [], 'the service refused nothing: --once exits 0 for this run');
  assert.equal(summary.spooled, 0);
  assert.deepEqual(lines(r.seen[0]!.body).map((l) => l.n), [2, 6], 'the others, in order, in one batch');
  assert.equal(cap.find('a spooled report cannot be sent (its file was removed or damaged); dropped from the spool').length, 4);
  assert.equal((await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log })).counters.rejected, 4);
});

test('drainSpool stops at the first retryable failure and keeps everything spooled', async () => {
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  await spool.append(Buffer.from('{}'), Date.now());
  const summary = await drainSpool({ spool, log: cap.log, ...FAST, send: (b, s) => sendBatch({ url: 'http://127.0.0.1:1', token: 't', timeoutMs: 500 }, b, s) });
  assert.equal(summary.spooled, 1);
  assert.equal(summary.delivered, 0);
  assert.match(summary.retryReason ?? '', /ECONNREFUSED/);
  assert.equal(spool.length, 1);
});

/** A receiver that answers every batch like the service (all stored) but holds the answer to the `hold`-th request until released. */
async function heldReceiver(hold: number) {
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let arrived!: () => void;
  const holding = new Promise<void>((r) => { arrived = r; });
  const seen: number[][] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ns = lines(gunzipSync(Buffer.concat(chunks)).toString('utf8')).map((l) => l.n);
      seen.push(ns);
      const answer = () => res.writeHead(200).end(JSON.stringify({ results: ns.map((_, i) => ({ line: i + 1, status: 'stored' })) }));
      if (seen.length === hold) { arrived(); void released.then(answer); } else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, holding, release, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('the next batch is read and compressed while one is in flight; a failure in the middle resends from it, in order, each report stored once', async () => {
  const r = await receiver([{ status: 200 }, { status: 503 }, { status: 200 }]);
  const cap = captureLog();
  const spool = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 12; i++) await spool.append(Buffer.from(JSON.stringify({ n: i })), Date.now());
  // What the loop reads, and when, next to what it sends: the read of a batch starts before the answer to the one before.
  const events: string[] = [];
  const readMany = spool.readMany.bind(spool);
  spool.readMany = (entries, read, unsendable) => { events.push(`read ${entries[0]!.seq}`); return readMany(entries, read, unsendable); };
  const send = async (b: EncodedBatch, s: AbortSignal) => {
    const first = (lines(gunzipSync(b.body).toString('utf8'))[0]!).n;
    events.push(`send ${first}`);
    const out = await sendBatch({ url: r.url, token: 't', timeoutMs: 2000 }, b, s);
    events.push(`answer ${first} ${out.kind}`);
    return out;
  };
  let first, second;
  const firstEvents: string[] = [];
  try {
    first = await drainSpool({ spool, log: cap.log, ...FAST, batchMaxReports: 4, send });
    firstEvents.push(...events.splice(0));
    second = await drainSpool({ spool, log: cap.log, ...FAST, batchMaxReports: 4, send });
  } finally { await r.close(); }
  assert.deepEqual(first, { delivered: 4, rejected: [], unsendable: [], spooled: 8, retryReason: '503 http_503' }, 'drainSpool stops at the 503');
  // 5-8 was being read as 1-4 went out, before its answer; then 9-12 as 5-8 went out (read, never sent).
  assert.deepEqual(firstEvents, ['read 1', 'read 5', 'send 1', 'answer 1 answered', 'read 9', 'send 5', 'answer 5 retry']);
  assert.deepEqual(second, { delivered: 8, rejected: [], unsendable: [], spooled: 0 });
  // After the failure nothing read ahead is trusted: the head is read again, and the pipeline starts over.
  assert.deepEqual(events, ['read 5', 'read 9', 'send 5', 'answer 5 answered', 'send 9', 'answer 9 answered']);
  assert.deepEqual(r.seen.map((s) => lines(s.body).map((l) => l.n)), [[1, 2, 3, 4], [5, 6, 7, 8], [5, 6, 7, 8], [9, 10, 11, 12]]);
  await spool.settled();
  assert.equal(readdirSync(spool.dir).filter((f) => f.startsWith('r-')).length, 0, 'every delivered file unlinked');
});

test('a batch read ahead whose reports the spool bound dropped meanwhile is not sent; the bytes count stays right', async () => {
  const r = await heldReceiver(1);
  const cap = captureLog();
  const body = (n: number) => Buffer.from(JSON.stringify({ n: 100 + n }));
  const size = body(1).length;
  const spool = await Spool.open({ dir: dir(), maxBytes: 10 * size, maxAgeMs: 1e9, log: cap.log });
  for (let i = 1; i <= 10; i++) await spool.append(body(i), Date.now());
  const drained = drainSpool({ spool, log: cap.log, ...FAST, batchMaxReports: 3, send: (b, s) => sendBatch({ url: r.url, token: 't', timeoutMs: 5000 }, b, s) });
  let summary;
  try {
    await r.holding;
    // While 1-3 is in flight (4-6 read ahead), six more reports push the six oldest out of the bounded spool.
    for (let i = 11; i <= 16; i++) await spool.append(body(i), Date.now());
    assert.equal(spool.counters.dropped, 6);
  } finally {
    r.release();
    summary = await drained;
    await r.close();
  }
  assert.deepEqual(r.seen.map((ns) => ns.map((n) => n - 100)), [[1, 2, 3], [7, 8, 9], [10, 11, 12], [13, 14, 15], [16]]);
  assert.equal(summary.spooled, 0);
  assert.equal(spool.bytes, 0, 'reports dropped while in flight are not subtracted twice');
});

test('a batch is compressed as one gzip stream of the reports in order, with a 4 KiB window, whatever its size', async () => {
  const reports = Array.from({ length: 600 }, (_, i) => Buffer.from(JSON.stringify({ n: i, pad: 'x'.repeat(i % 300), at: i * 7919 })));
  const { body, reports: count } = await encodeBatch(reports);
  assert.equal(count, 600);
  const text = gunzipSync(body).toString('utf8');
  assert.equal(text, reports.map((b) => `${b.toString()}\n`).join(''));
  // The stream is readable with the smallest window that still covers it: a 4 KiB window (windowBits 12), not zlib's 32 KiB.
  assert.equal(gunzipSync(body, { windowBits: 12 }).toString('utf8'), text);
  assert.throws(() => gunzipSync(gzipSync(Buffer.from(text)), { windowBits: 12 }), /invalid window size|invalid distance/, 'a default-window stream needs more');
});
