import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { coarsen, decodeRollup, encodeRollup, mergeRollups, rollUp } from '../../../src/metrics/storage/engine/rollup.js';

const rows = fc.array(fc.tuple(fc.integer({ min: 0, max: 7_200_000 }), fc.integer({ min: -10_000, max: 10_000 }), fc.boolean()), { minLength: 1, maxLength: 300 })
  .map((xs) => {
    const sorted = [...new Map(xs.map((x) => [x[0], x])).values()].sort((a, b) => a[0] - b[0]);
    return { ts: Float64Array.from(sorted, (x) => x[0]), columns: new Map([[1, Float64Array.from(sorted, (x) => (x[2] ? x[1] / 10 : Number.NaN))]]) };
  });

test('rollup cells hold exactly the sum, count, min and max of their raw values; stored and merged they stay exact (property)', () => {
  fc.assert(fc.property(rows, rows, fc.constantFrom(60_000, 900_000), (a, b, width) => {
    const merged = decodeRollup(encodeRollup(mergeRollups([rollUp(a, width), rollUp(b, width)], width)), width);
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
    const coarse = coarsen(merged, 3_600_000);
    const total = [...brute.values()].flat();
    assert.equal([...(coarse.metrics.get(1)?.count ?? [])].reduce((x, y) => x + y, 0), total.length);
  }), { numRuns: 300 });
});
