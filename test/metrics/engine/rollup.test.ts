import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Buckets, tidyWithin } from '../../../src/metrics/storage/engine/buckets.js';
import { decodeBlock, encodeBlock, FAST_QUALITY } from '../../../src/metrics/storage/engine/block-codec.js';
import { coarsen, encodeRollup, mergeRollups, rollUp, rollUpBlocks } from '../../../src/metrics/storage/engine/rollup.js';

const rows = fc.array(fc.tuple(fc.integer({ min: 0, max: 7_200_000 }), fc.integer({ min: -10_000, max: 10_000 }), fc.boolean()), { minLength: 1, maxLength: 300 })
  .map((xs) => {
    const sorted = [...new Map(xs.map((x) => [x[0], x])).values()].sort((a, b) => a[0] - b[0]);
    return { ts: Float64Array.from(sorted, (x) => x[0]), columns: new Map([[1, Float64Array.from(sorted, (x) => (x[2] ? x[1] / 10 : Number.NaN))]]) };
  });

test('rollup cells hold exactly the sum, count, min and max of their raw values; merged, stored and read back into buckets they stay exact (property)', () => {
  fc.assert(fc.property(rows, rows, fc.constantFrom(60_000, 900_000), fc.constantFrom(1, 2), (a, b, width, cellsPerBucket) => {
    const merged = mergeRollups([rollUp(a, width), rollUp(b, width)], width);
    const brute = new Map<number, number[]>();
    for (const blk of [a, b]) blk.ts.forEach((t, i) => {
      const v = blk.columns.get(1)![i]!;
      if (Number.isNaN(v)) return;
      const cell = Math.floor(t / width) * width;
      brute.set(cell, [...(brute.get(cell) ?? []), v]);
    });
    const stats = merged.metrics.get(1);
    for (const [cell, vals] of brute) {
      const k = [...merged.cells].indexOf(cell);
      assert.ok(k >= 0 && stats);
      assert.equal(stats.count[k], vals.length);
      assert.equal(stats.sum[k], Number((vals.reduce((x, y) => x + y, 0)).toFixed(1)), 'decimal sums stay exact decimals');
      assert.equal(stats.min[k], Math.min(...vals));
      assert.equal(stats.max[k], Math.max(...vals));
    }
    // Stored, then read back into a grid of whole cells (one or two per bucket): each bucket's mean, min and max are its raw values'.
    const bucketWidth = width * cellsPerBucket;
    const count = Math.floor(7_200_000 / bucketWidth) + 1;
    const buckets = new Buckets({ start: 0, width: bucketWidth, count, tier: width, from: 0, to: count * bucketWidth - 1 });
    buckets.addRollup(encodeRollup(merged));
    // A bucket's sum is its cells' exact sums added in time order (float additions, as the query does them).
    const byBucket = new Map<number, { sum: number; vals: number[] }>();
    for (const [cell, vals] of [...brute].sort((x, y) => x[0] - y[0])) {
      const bucket = Math.floor(cell / bucketWidth) * bucketWidth;
      const acc = byBucket.get(bucket) ?? { sum: 0, vals: [] };
      byBucket.set(bucket, { sum: acc.sum + Number(vals.reduce((x, y) => x + y, 0).toFixed(1)), vals: [...acc.vals, ...vals] });
    }
    const read = buckets.columns(true);
    assert.deepEqual(read.timestamps, [...byBucket.keys()].sort((x, y) => x - y));
    read.timestamps.forEach((bucket, i) => {
      const { sum, vals } = byBucket.get(bucket)!;
      assert.equal(read.metrics.get(1)![i], tidyWithin(sum / vals.length, Math.min(...vals), Math.max(...vals)));
      assert.equal(read.min!.get(1)![i], Math.min(...vals));
      assert.equal(read.max!.get(1)![i], Math.max(...vals));
    });
    const coarse = coarsen(merged, 3_600_000);
    const total = [...brute.values()].flat();
    assert.equal([...(coarse.metrics.get(1)?.count ?? [])].reduce((x, y) => x + y, 0), total.length);
  }), { numRuns: 300 });
});

// One host's block of the window at W: unique sorted times inside it, three metrics that come and go (NaN gaps).
const W = 7_200_000;
const hostBlock = (value: fc.Arbitrary<number>) => fc.array(fc.tuple(fc.integer({ min: W, max: W + 3_599_999 }), value, value, value, fc.boolean()), { minLength: 1, maxLength: 120 })
  .map((xs) => {
    const sorted = [...new Map(xs.map((x) => [x[0], x])).values()].sort((a, b) => a[0] - b[0]);
    return {
      ts: Float64Array.from(sorted, (x) => x[0]),
      columns: new Map([
        [1, Float64Array.from(sorted, (x) => x[1])],
        [2, Float64Array.from(sorted, (x) => (x[4] ? x[2] : Number.NaN))],
        [5, Float64Array.from(sorted, (x, i) => (i % 3 === 0 ? Number.NaN : x[3]))],
      ]),
    };
  });
const decimals = fc.oneof(fc.integer({ min: -1_000_000, max: 1_000_000 }).map((m) => m / 100), fc.integer({ min: 0, max: 2 ** 40 }));
const doubles = fc.double({ min: -1e12, max: 1e12, noNaN: true });

test('a tenant window rolled up from its hosts\' block bytes is the merge of each block\'s rollup, byte for byte (property)', () => {
  fc.assert(fc.property(fc.array(hostBlock(decimals), { minLength: 1, maxLength: 6 }), (blocks) => {
    const encoded = blocks.map((b) => encodeBlock(b, FAST_QUALITY));
    const reference = mergeRollups(encoded.map((b) => rollUp(decodeBlock(b), 60_000)), 60_000);
    assert.deepEqual(Buffer.from(encodeRollup(rollUpBlocks(encoded, W, 3_600_000, 60_000))), Buffer.from(encodeRollup(reference)));
  }), { numRuns: 150 });
});

test('with arbitrary doubles the cells, counts, minima and maxima are the same; sums differ by at most float rounding (added in another order) (property)', () => {
  fc.assert(fc.property(fc.array(hostBlock(doubles), { minLength: 1, maxLength: 6 }), (blocks) => {
    const encoded = blocks.map((b) => encodeBlock(b, FAST_QUALITY));
    const reference = mergeRollups(encoded.map((b) => rollUp(decodeBlock(b), 60_000)), 60_000);
    const folded = rollUpBlocks(encoded, W, 3_600_000, 60_000);
    assert.deepEqual([...folded.cells], [...reference.cells]);
    assert.deepEqual([...folded.metrics.keys()].sort(), [...reference.metrics.keys()].sort());
    for (const [id, r] of reference.metrics) {
      const f = folded.metrics.get(id)!;
      assert.deepEqual([...f.count], [...r.count]);
      assert.deepEqual([...f.min], [...r.min]);
      assert.deepEqual([...f.max], [...r.max]);
      // Two orders of float addition of n values differ by at most 2 (n - 1) eps times the sum of their magnitudes.
      const magnitude = new Map<number, number>();
      for (const b of blocks) b.ts.forEach((t, i) => {
        const v = b.columns.get(id)![i]!;
        if (!Number.isNaN(v)) magnitude.set(Math.floor(t / 60_000) * 60_000, (magnitude.get(Math.floor(t / 60_000) * 60_000) ?? 0) + Math.abs(v));
      });
      f.sum.forEach((sum, k) => {
        if (Number.isNaN(sum)) { assert.ok(Number.isNaN(r.sum[k]!)); return; }
        const bound = 2 * f.count[k]! * Number.EPSILON * magnitude.get(folded.cells[k]!)!;
        assert.ok(Math.abs(sum - r.sum[k]!) <= bound, `cell ${k}: ${sum} vs ${r.sum[k]} (bound ${bound})`);
      });
    }
  }), { numRuns: 150 });
});

test('a block whose rows lie outside the window it is rolled up for is refused, not folded into the wrong cells', () => {
  const block = encodeBlock({ ts: Float64Array.of(W - 10_000, W + 10_000), columns: new Map([[1, Float64Array.of(1, 2)]]) }, FAST_QUALITY);
  assert.throws(() => rollUpBlocks([block], W, 3_600_000, 60_000), /lies outside its window/);
  const late = encodeBlock({ ts: Float64Array.of(W + 3_600_000), columns: new Map([[1, Float64Array.of(1)]]) }, FAST_QUALITY);
  assert.throws(() => rollUpBlocks([late], W, 3_600_000, 60_000), /lies outside its window/);
});

test('tidyWithin drops summation noise, and keeps the exact mean where 15 digits would leave the bucket\'s values', () => {
  assert.equal(tidyWithin((0.1 + 0.2) / 2, 0.1, 0.2), 0.15);
  assert.equal(tidyWithin(2_345_678_901_234_569, 2_345_678_901_234_569, 2_345_678_901_234_569), 2_345_678_901_234_569);
  assert.equal(tidyWithin(2_345_678_901_234_567.5, 2_345_678_901_234_567, 2_345_678_901_234_568), 2_345_678_901_234_567.5);
  assert.equal(tidyWithin(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
});
