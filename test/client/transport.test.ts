import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTransport } from '../../src/client/transport.js';
import { SyncClientError } from '../../src/client/errors.js';

/** A fetch that fails without an answer `failures` times (as a stale pooled connection does), then answers 200. */
function flaky(failures: number) {
  let calls = 0;
  const fetch = (async () => {
    calls++;
    if (calls <= failures) throw new TypeError('fetch failed');
    return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
  }) as unknown as typeof globalThis.fetch;
  return { fetch, calls: () => calls };
}

test('a request safe to repeat that got no answer is sent again, up to twice; others fail at once with a network error', async () => {
  const twice = flaky(2);
  const t = createTransport({ baseUrl: 'http://sync.invalid', fetch: twice.fetch });
  assert.equal((await t.request('POST', '/api/sync/pull', { json: {}, idempotent: true })).status, 200);
  assert.equal(twice.calls(), 3);

  const thrice = flaky(3);
  const t3 = createTransport({ baseUrl: 'http://sync.invalid', fetch: thrice.fetch });
  await assert.rejects(t3.request('POST', '/api/sync/pull', { json: {}, idempotent: true }), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
  assert.equal(thrice.calls(), 3, 'three tries in all');

  const once = flaky(1);
  const t1 = createTransport({ baseUrl: 'http://sync.invalid', fetch: once.fetch });
  await assert.rejects(t1.request('POST', '/api/auth/refresh', { json: {} }), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
  assert.equal(once.calls(), 1, 'a refresh is never sent twice');
});

/** A fetch that never answers: only an abort of its signal ends it. */
function silent() {
  let calls = 0;
  const fetch = ((_input: string, init?: RequestInit) => {
    calls++;
    return new Promise<Response>((_resolve, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal!.reason)));
  }) as unknown as typeof globalThis.fetch;
  return { fetch, calls: () => calls };
}

test('a request with no answer within requestTimeoutMs fails with a network error, and is not resent at once', { timeout: 10_000 }, async () => {
  const stalled = silent();
  const t = createTransport({ baseUrl: 'http://sync.invalid', fetch: stalled.fetch, requestTimeoutMs: 20 });
  await assert.rejects(t.request('POST', '/api/sync/pull', { json: {}, idempotent: true }), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
  assert.equal(stalled.calls(), 1);
});

test('closing cuts short a request in flight and a 429 wait with closed, leaving no timer behind', { timeout: 10_000 }, async () => {
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const closing = new AbortController();
  const stalled = silent();
  const t = createTransport({ baseUrl: 'http://sync.invalid', fetch: stalled.fetch }, closing.signal);
  const inFlight = t.request('POST', '/api/sync/pull', { json: {}, idempotent: true });

  let limited = 0;
  const rateLimited = createTransport({
    baseUrl: 'http://sync.invalid',
    fetch: (async () => { limited++; return new Response(JSON.stringify({ error: 'rate_limited', retry_after: 60 }), { status: 429 }); }) as unknown as typeof fetch,
    requestTimeoutMs: 0,
  }, closing.signal);
  const waiting = rateLimited.request('GET', '/api/sync/status');
  while (limited === 0) await new Promise((r) => setImmediate(r));
  closing.abort();
  const isClosed = (e: unknown) => e instanceof SyncClientError && e.code === 'closed';
  await assert.rejects(inFlight, isClosed);
  await assert.rejects(waiting, isClosed);
  await assert.rejects(t.request('GET', '/api/sync/status'), isClosed);
  assert.equal(limited, 1);
  assert.equal(stalled.calls(), 1, 'nothing is sent once closed');
  assert.equal(timers(), before, 'the timers of the wait and of the request\'s time limit are cleared');
});

/**
 * A real HTTP server that answers 200 and sends `sent` bytes of a longer JSON body: then it cuts the connection
 * (`cut`), or keeps it open without sending more. Node's real fetch reads it.
 */
async function partialAnswers(mode: 'cut' | 'stall') {
  const { createServer } = await import('node:http');
  let requests = 0;
  const server = createServer((_req, res) => {
    requests++;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    res.write('{"changes": [');
    if (mode === 'cut') setTimeout(() => res.socket?.destroy(), 10);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const json = (res: Response) => res.json() as Promise<unknown>;

test('an answer whose body breaks off is a network error, resent like no answer when the request is safe to repeat', { timeout: 10_000 }, async (t) => {
  const server = await partialAnswers('cut');
  t.after(server.close);
  const transport = createTransport({ baseUrl: server.baseUrl });
  await assert.rejects(transport.request('GET', '/api/sync/status', { read: json }), (e: unknown) => e instanceof SyncClientError && e.code === 'network' && /broke off/.test(e.message));
  assert.equal(server.requests(), 1);
  await assert.rejects(transport.request('POST', '/api/sync/pull', { json: {}, idempotent: true, read: json }), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
  assert.equal(server.requests(), 4, 'sent again twice');
});

test('an answer whose body stops arriving for requestTimeoutMs is cut: a network error, not resent at once; a slow body that keeps coming is not cut', { timeout: 10_000 }, async (t) => {
  const server = await partialAnswers('stall');
  t.after(server.close);
  const transport = createTransport({ baseUrl: server.baseUrl, requestTimeoutMs: 200 });
  const started = Date.now();
  await assert.rejects(transport.request('POST', '/api/sync/pull', { json: {}, idempotent: true, read: json }),
    (e: unknown) => e instanceof SyncClientError && e.code === 'network' && /no byte of the answer for 200 ms/.test(e.message));
  assert.ok(Date.now() - started >= 200);
  assert.equal(server.requests(), 1, 'not sent again at once');

  const { createServer } = await import('node:http');
  const slow = createServer((_req, res) => {
    const text = JSON.stringify({ changes: [], note: 'x'.repeat(40) });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(text.length) });
    let at = 0;
    // A byte every 50 ms: 3 s in all, three times the bound, each gap a twentieth of it (a loaded machine stalls a
    // test's timers by a few hundred ms, so the bound here is not the 200 ms above).
    const timer = setInterval(() => { res.write(text[at++]!); if (at === text.length) { clearInterval(timer); res.end(); } }, 50);
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { slow.closeAllConnections(); slow.close(() => resolve()); }));
  const slowTransport = createTransport({ baseUrl: `http://127.0.0.1:${(slow.address() as { port: number }).port}`, requestTimeoutMs: 1000 });
  assert.deepEqual(await slowTransport.request('GET', '/api/sync/status', { read: json }), { changes: [], note: 'x'.repeat(40) });
});

test('closing, or the caller\'s signal, cuts short a body still arriving: closed, or the signal\'s reason', { timeout: 10_000 }, async (t) => {
  const server = await partialAnswers('stall');
  t.after(server.close);
  const closing = new AbortController();
  const transport = createTransport({ baseUrl: server.baseUrl }, closing.signal);
  const reading = transport.request('GET', '/api/sync/status', { read: json });
  while (server.requests() < 1) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50));
  closing.abort();
  await assert.rejects(reading, (e: unknown) => e instanceof SyncClientError && e.code === 'closed');

  const caller = new AbortController();
  const open = createTransport({ baseUrl: server.baseUrl });
  const download = open.request('GET', '/api/sync/attachment/x', { signal: caller.signal, read: json });
  while (server.requests() < 2) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50));
  caller.abort(new Error('not needed any more'));
  await assert.rejects(download, /not needed any more/);
});

test('a 429 whose retry_after is past maxRetryAfterSeconds (a lockout\'s 900 s) fails at once with rate_limited and its retryAfter; one within it is waited out', async () => {
  for (const [retryAfter, sent] of [[900, 1], [121, 1], [1, 2]] as const) {
    let calls = 0;
    const waited: number[] = [];
    const t = createTransport({
      baseUrl: 'http://sync.invalid',
      fetch: (async () => (++calls === 1
        ? new Response(JSON.stringify({ error: 'rate_limited', retry_after: retryAfter }), { status: 429 })
        : new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } }))) as unknown as typeof fetch,
      sleep: async (ms: number) => { waited.push(ms); },
    }, new AbortController().signal);
    const call = t.request('GET', '/api/sync/status');
    if (sent === 1) await assert.rejects(call, (e: unknown) => e instanceof SyncClientError && e.code === 'rate_limited' && e.retryAfter === retryAfter);
    else await call;
    assert.equal(calls, sent, `retry_after ${retryAfter}`);
    assert.deepEqual(waited, sent === 1 ? [] : [retryAfter * 1000]);
  }
});
