import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BACKENDS, freshStorage } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { ingest, makeReport } from '../helpers/metrics.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { change, device } from '../sync/push-client.js';
import { metricsToken, spawnService } from './real-process.js';

/** Sends `total` requests keeping `concurrency` of them outstanding; resolves with every reply in sending order. */
async function drive(total: number, concurrency: number, send: (i: number) => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = new Array<Reply>(total);
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++;
      replies[i] = await send(i);
    }
  }));
  return replies;
}

/** Polls /healthz until `stop` settles; counts probes answered 200 while the work was still going. */
async function probeWhile(url: string, stop: Promise<unknown>): Promise<{ answeredDuring: number; failures: number }> {
  let done = false;
  void stop.finally(() => { done = true; });
  let answeredDuring = 0;
  let failures = 0;
  while (!done) {
    const r = await fetch(`${url}/healthz`).catch(() => undefined);
    if (!r || r.status !== 200) failures++;
    else if (!done) answeredDuring++;
    await r?.text();
    await sleep(10);
  }
  return { answeredDuring, failures };
}

/** Every reply is 200 or a 503 `unavailable` with Retry-After; some work was done and some was shed. */
function assertShed(replies: Reply[], what: string): void {
  const statuses = replies.map((r) => r.status);
  assert.ok(statuses.every((s) => s === 200 || s === 503), `${what}: only 200 or 503, got ${[...new Set(statuses)].join(', ')}`);
  const shed = replies.filter((r) => r.status === 503);
  assert.ok(shed.length > 0, `${what}: the excess is shed`);
  assert.ok(statuses.includes(200), `${what}: work within the bounds is done`);
  for (const r of shed) {
    assert.equal(r.body.error, 'unavailable');
    assert.ok(Number(r.headers.get('retry-after')) >= 1, 'a 503 says when to retry');
  }
}

// Each service runs as its own process, as in production: the probes measure its event loop, not the test's.
describe('overload', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`metrics on ${backend}: with 64 series and aggregates in flight, /healthz keeps answering and the excess gets 503, not timeouts`, async (t) => {
      const storage = await freshStorage(backend);
      t.after(() => storage.cleanup());
      const token = await metricsToken(storage, 'acme');
      const other = await metricsToken(storage, 'other');
      const svc = await spawnService('metrics', storage);
      t.after(() => svc.kill());
      const now = Date.now();
      for (let host = 0; host < 40; host++) {
        const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => ingest(svc.url, token, makeReport({ agentId: `h-${host}`, ts: now - i * 60_000 - host }))));
        assert.ok(replies.every((r) => r.status === 200));
      }
      const work = drive(256, 64, (i) => call(svc.url, 'GET',
        i % 2 ? `/api/v1/aggregate?from=${now - 3_600_000}&to=${now}&points=10000` : `/api/v1/host/h-${i % 40}?from=0&points=10000`,
        { token }));
      const probes = await probeWhile(svc.url, work);
      assertShed(await work, 'series and aggregates');
      assert.equal(probes.failures, 0, 'every probe answered 200');
      assert.ok(probes.answeredDuring > 0, '/healthz answered while 64 requests were in flight');
      assert.equal((await call(svc.url, 'GET', '/api/v1/aggregate', { token: other })).status, 200, 'another tenant is served once the burst is over');
    });

    test(`sync on ${backend}: with 256 pushes and pulls in flight, /healthz keeps answering, the excess gets 503, and a shed push stored nothing`, async (t) => {
      const storage = await freshStorage(backend);
      t.after(() => storage.cleanup());
      const svc = await spawnService('sync', storage, ['--scrypt-log2n', '10', '--user-rate-limit', '1000000', '--ip-rate-limit', '1000000']);
      t.after(() => svc.kill());
      const users = await Promise.all(Array.from({ length: 4 }, () => newUser(svc)));
      const businesses = await Promise.all(users.map((u) => newBusiness(svc, u)));
      const records = Array.from({ length: 512 }, () => randomUUID());
      const work = drive(512, 256, (i) => {
        const u = i % users.length;
        const d = device(svc.url, users[u]!.token, businesses[u]!.id, `dev-${i}`);
        return i % 4 === 3 ? d.pull(0) : d.push({ changes: Array.from({ length: 20 }, (_, k) => change(k ? randomUUID() : records[i]!, 1, { n: i, k })) });
      });
      const probes = await probeWhile(svc.url, work);
      const replies = await work;
      assertShed(replies, 'pushes and pulls');
      assert.equal(probes.failures, 0, 'every probe answered 200');
      assert.ok(probes.answeredDuring > 0, '/healthz answered while 256 requests were in flight');

      for (let u = 0; u < users.length; u++) {
        const pulled = await device(svc.url, users[u]!.token, businesses[u]!.id).pullAll(0);
        const stored = new Set(pulled.changes.map((c) => c.record_uuid));
        assert.equal(stored.size, pulled.changes.length, 'no record twice');
        replies.forEach((r, i) => {
          if (i % users.length !== u || i % 4 === 3) return;
          assert.equal(stored.has(records[i]!), r.status === 200, `push ${i} answered ${r.status}`);
        });
      }
    });
  }
});
