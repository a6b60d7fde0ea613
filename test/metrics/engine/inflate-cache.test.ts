import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { brotliCompressSync } from 'node:zlib';
import fc from 'fast-check';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore } from '../../../src/metrics/domain/metrics-store.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { inflateCache } from '../../../src/metrics/storage/engine/block-codec.js';
import { InflateCache } from '../../../src/metrics/storage/engine/inflate-cache.js';
import { databaseConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';

/** Marks which bytes were inflated: each byte + 1, so a wrong entry shows in the output. */
const bumped = (b: Uint8Array) => Uint8Array.from(b, (x) => (x + 1) & 0xff);

test('an entry is found by its bytes, and bytes that only share its length and end are not taken for it', () => {
  const inflated: Uint8Array[] = [];
  const cache = new InflateCache(1 << 20, (b) => { inflated.push(b); return bumped(b); });
  // Same length, same last 12 bytes: the same cheap key, different blocks.
  const a = Uint8Array.from({ length: 40 }, (_, i) => (i < 20 ? 1 : 9));
  const b = Uint8Array.from({ length: 40 }, (_, i) => (i < 20 ? 2 : 9));
  assert.deepEqual(cache.inflate(a), bumped(a));
  assert.deepEqual(cache.inflate(b), bumped(b));
  assert.deepEqual(cache.inflate(Uint8Array.from(a)), bumped(a), 'a copy of the bytes is the same entry');
  assert.deepEqual(cache.inflate(b), bumped(b));
  assert.equal(inflated.length, 2, 'each block inflated once');
  assert.deepEqual([cache.hits, cache.misses], [2, 2]);
});

test('entries are dropped oldest first where the ring needs room, and never read back wrong', () => {
  let calls = 0;
  const cache = new InflateCache(400, (b) => { calls++; return bumped(b); });
  const block = (n: number) => Uint8Array.from({ length: 50 }, () => n);
  for (let n = 0; n < 4; n++) cache.inflate(block(n)); // 4 x (50 + 50) = 400 bytes: all held
  assert.equal(cache.size, 4);
  calls = 0;
  for (let n = 0; n < 4; n++) assert.deepEqual(cache.inflate(block(n)), bumped(block(n)));
  assert.equal(calls, 0, 'all four held');
  cache.inflate(block(4)); // the ring is full: block 0, the oldest, makes room
  assert.equal(cache.size, 4);
  calls = 0;
  for (const n of [1, 2, 3, 4]) assert.deepEqual(cache.inflate(block(n)), bumped(block(n)));
  assert.equal(calls, 0, 'the four newest stayed');
  assert.deepEqual(cache.inflate(block(0)), bumped(block(0)));
  assert.equal(calls, 1, 'the oldest was dropped');
});

test('any sequence of blocks of any size reads back as inflated, the block just inflated is held when it fits, and the ring holds no more than its budget', () => {
  fc.assert(fc.property(
    fc.integer({ min: 16, max: 600 }),
    fc.array(fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 1, max: 200 })), { minLength: 1, maxLength: 80 }),
    (budget, picks) => {
      const cache = new InflateCache(budget, (b) => bumped(b));
      for (const [id, length] of picks) {
        // Block `id` of a given length: the same bytes whenever the pair comes back. Only the first byte tells the ids
        // apart, so blocks of one length share their cheap key.
        const packed = Uint8Array.from({ length }, (_, i) => (i === 0 ? id : (i * 7 + length) & 0xff));
        assert.deepEqual(Uint8Array.from(cache.inflate(packed)), bumped(packed));
        const hits = cache.hits;
        assert.deepEqual(Uint8Array.from(cache.inflate(packed)), bumped(packed));
        assert.equal(cache.hits, hits + (2 * length <= budget ? 1 : 0), `block ${id} of ${length} bytes in a ring of ${budget}`);
        assert.ok(cache.bytes <= budget, `${cache.bytes} bytes held in a ring of ${budget}`);
      }
    }), { numRuns: 300 });
});

test('a block larger than the whole budget is inflated and not kept', () => {
  const cache = new InflateCache(100, bumped);
  const big = new Uint8Array(80).fill(3);
  assert.deepEqual(cache.inflate(big), bumped(big));
  assert.equal(cache.size, 0);
  assert.deepEqual(cache.inflate(big), bumped(big));
  assert.equal(cache.hits, 0);
});

test('real Brotli blocks read back through the cache as they were written', () => {
  const cache = new InflateCache(1 << 20);
  const raw = Buffer.from('block contents '.repeat(50));
  const packed = brotliCompressSync(raw);
  assert.deepEqual(Buffer.from(cache.inflate(packed)), raw);
  assert.deepEqual(Buffer.from(cache.inflate(packed)), raw);
  assert.equal(cache.hits, 1);
});

const T0 = Date.UTC(2026, 10, 20, 0);
const NOW = T0 + 4 * WINDOW_MS;

for (const backend of BACKENDS) {
  describe(`inflated blocks kept across queries on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    let tenantId: string;

    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 100 }, now: () => NOW, writer: { sealIntervalMs: 0 }, foldThreads: 0 });
      tenantId = (await newTenant(store)).tenantId;
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    test('a window sealed again with a late report reads the new block, not the one read before', async () => {
      const report = (ts: number, cpu: number) => ({ tenantId, hostId: 'h1', hostname: 'h1', platform: 'linux', ts, metrics: ReportMetrics.of([['cpu.usage', cpu]]) });
      const first = Array.from({ length: 360 }, (_, i) => report(T0 + i * 10_000 + 5_000, 10));
      assert.ok((await store.appendReports(first)).every((o) => o.status === 'stored'));
      await store.flush();
      const q = { from: T0, to: T0 + WINDOW_MS - 1, points: 12, minmax: true };
      const before = (await store.readHostSeries(tenantId, 'h1', q))!;
      const again = (await store.readHostSeries(tenantId, 'h1', q))!;
      assert.deepEqual(again, before);
      const hits = inflateCache.hits;
      assert.ok(hits > 0, 'the second read took the inflated block from the cache');

      // A late report lands in the sealed window: the window is sealed again into a new block.
      assert.equal((await store.appendReports([report(T0 + 1_000, 1000)]))[0]!.status, 'stored');
      await store.flush();
      const [head] = await databaseConn(database).all<{ n: number | string }>('SELECT COUNT(*) AS n FROM reports', []);
      assert.equal(Number(head!.n), 0, 'the late report was sealed into the window\'s block, not left in the head');
      const after = (await store.readHostSeries(tenantId, 'h1', q))!;
      const cpu = [...after.metrics.values()][0]!;
      assert.equal(after.max!.get([...after.metrics.keys()][0]!)![0], 1000, 'the late report is in the first bucket');
      assert.ok(Math.abs(cpu[0]! - (30 * 10 + 1000) / 31) < 1e-9, `first bucket mean ${cpu[0]}`);
      assert.deepEqual(cpu.slice(1), [...before.metrics.values()][0]!.slice(1), 'the other buckets are unchanged');
    });
  });
}
