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
