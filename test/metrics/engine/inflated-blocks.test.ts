// Decompressed blocks kept for later queries: keyed by the compressed bytes themselves, bounded, least recently used out first.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { encodeBlock } from '../../../src/metrics/storage/engine/block-codec.js';
import { createInflatedBlocks, inflateBlock } from '../../../src/metrics/storage/engine/inflated-blocks.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';

/** A block of `rows` reports of one metric; `shift` changes its values, not its size. */
function block(rows: number, shift = 0): Uint8Array {
  const ts = Float64Array.from({ length: rows }, (_, i) => 1_700_000_000_000 + i * 10_000);
  return encodeBlock({ ts, columns: new Map([[1, Float64Array.from(ts, (_, i) => ((i * 7 + shift) % 100) / 10)]]) });
}

test('an entry is read back exactly, and a second read of the same bytes is a hit', () => {
  const cache = createInflatedBlocks(1 << 20);
  const a = block(360);
  const first = cache.inflate(a);
  assert.deepEqual(Buffer.from(first), Buffer.from(inflateBlock(a)));
  assert.equal(cache.hits, 0);
  assert.deepEqual(Buffer.from(cache.inflate(Buffer.from(a))), Buffer.from(first), 'equal bytes in another buffer find the entry');
  assert.equal(cache.hits, 1);
  assert.equal(cache.bytes, first.byteLength, 'an exact-size copy, not the decoder\'s larger buffer');
});

test('other bytes of the same size are another entry: a window sealed again is never read stale', () => {
  const cache = createInflatedBlocks(1 << 20);
  const [a, b] = [block(360, 0), block(360, 3)];
  const rawA = Buffer.from(cache.inflate(a));
  const rawB = Buffer.from(cache.inflate(b));
  assert.notDeepEqual(rawA, rawB);
  assert.deepEqual(rawB, Buffer.from(inflateBlock(b)));
  assert.equal(cache.hits, 0);
});

test('past the budget the least recently used entry goes first; an entry larger than the budget is not kept', () => {
  const [a, b, c] = [block(360, 0), block(360, 1), block(360, 2)];
  const size = inflateBlock(a).byteLength;
  const cache = createInflatedBlocks(2 * size + 10);
  cache.inflate(a);
  cache.inflate(b);
  cache.inflate(a); // a is now the most recent
  assert.equal(cache.hits, 1);
  cache.inflate(c); // evicts b
  assert.ok(cache.bytes <= 2 * size + 10);
  cache.inflate(a);
  cache.inflate(c);
  assert.equal(cache.hits, 3);
  cache.inflate(b);
  assert.equal(cache.hits, 3, 'b was evicted');

  const tiny = createInflatedBlocks(size - 1);
  tiny.inflate(a);
  tiny.inflate(a);
  assert.equal(tiny.hits, 0);
  assert.equal(tiny.bytes, 0);
});

for (const backend of BACKENDS) {
  describe(`a store's reads after a sealed window changes, on ${backend}`, () => {
    const T0 = Date.UTC(2026, 10, 20, 0);
    const NOW = T0 + 3 * WINDOW_MS;
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;

    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000 }, now: () => NOW, writer: { sealIntervalMs: 0 }, foldThreads: 1 });
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    test('a late report sealed into a window already read (and kept decompressed) is in the next read, raw and bucketed', async () => {
      const { tenantId } = await newTenant(store);
      const report = (ts: number, v: number) => ({ tenantId, hostId: 'h', hostname: 'h', platform: 'linux', ts, metrics: new Map([['cpu.usage', v]]) });
      // Every 20 s of the first window but one slot; the late report fills it with a value no other report has.
      const late = T0 + 1_000_010;
      const first = Array.from({ length: 180 }, (_, i) => report(T0 + i * 20_000, 10)).filter((r) => r.ts !== late);
      assert.ok((await store.appendReports(first)).every((o) => o.status === 'stored'));
      await store.flush();
      const q = { from: T0, to: T0 + WINDOW_MS - 1, minmax: true };
      const cpu = async (points: number) => {
        const s = (await store.readHostSeries(tenantId, 'h', { ...q, points }))!;
        const agg = await store.readAggregate(tenantId, { ...q, points });
        return { s, agg, values: [...s.metrics.values()][0]!, aggMax: [...agg.max!.values()][0]! };
      };
      const before = await cpu(10_000);
      assert.equal(before.values.length, 180);
      assert.ok(before.values.every((v) => v === 10));
      await cpu(10); // the bucketed reads decompress the same block

      assert.equal((await store.appendReports([report(late, 99)]))[0]!.status, 'stored');
      await store.flush();
      const raw = await cpu(10_000);
      assert.equal(raw.values.length, 181);
      assert.equal(raw.values[raw.s.timestamps.indexOf(late)], 99);
      const bucketed = await cpu(10);
      assert.equal(Math.max(...(bucketed.s.max!.values().next().value as number[])), 99);
      assert.equal(Math.max(...bucketed.aggMax as number[]), 99);
    });
  });
}
