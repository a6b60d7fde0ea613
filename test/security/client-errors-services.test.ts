import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rawExchange } from '../helpers/http.js';
import { startMetrics } from '../helpers/metrics.js';
import { startSync } from '../helpers/sync.js';

/**
 * What Node's HTTP layer refuses before any route runs, through the real services (both API references list 417 and
 * the 400 of a request without Host; test/core/client-error.test.ts covers the shared app itself, 408 included).
 */
async function raw(url: string, data: string): Promise<{ status: number; body: { error?: string; details?: string } }> {
  const [head = '', body = ''] = (await rawExchange(Number(new URL(url).port), data)).split('\r\n\r\n', 2);
  return { status: Number(head.split(' ')[1]), body: JSON.parse(body) as { error?: string; details?: string } };
}

for (const [name, start, path] of [
  ['metrics', async () => startMetrics('sqlite'), '/api/v1/ingest'],
  ['sync', async () => startSync('sqlite'), '/api/sync/push'],
] as const) {
  test(`${name}: an Expect other than 100-continue gets 417 expectation_failed, a request without Host 400, in the {error, details} shape`, async (t) => {
    const s = await start();
    t.after(() => s.close());
    const refused = await raw(s.url, `POST ${path} HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
    assert.deepEqual([refused.status, refused.body.error], [417, 'expectation_failed']);
    const noHost = await raw(s.url, 'GET /healthz HTTP/1.1\r\n\r\n');
    assert.deepEqual([noHost.status, noHost.body.error], [400, 'invalid_request']);
  });
}
