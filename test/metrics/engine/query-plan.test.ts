import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { gridEnd, planGrid } from '../../../src/metrics/storage/engine/query-plan.js';

test('the grid is aligned to multiples of its width, covers [from, to], and never passes the budget (property)', () => {
  fc.assert(fc.property(
    fc.integer({ min: 0, max: 2 ** 42 }), fc.integer({ min: 0, max: 90 * 86_400_000 }), fc.integer({ min: 1, max: 10_000 }),
    fc.constantFrom([] as number[], [60_000, 3_600_000], [3_600_000]), fc.constantFrom(1, 10_000),
    (from, span, points, tiers, minWidth) => {
      const to = from + span;
      const g = planGrid(from, to, points, { minWidth, tiers });
      assert.ok(g.count <= points && g.count >= 1);
      assert.equal(g.start % g.width, 0);
      assert.ok(g.start <= from && gridEnd(g) > to);
      assert.ok(g.from === from && g.to === to, 'the grid carries the range its buckets are clipped to');
      assert.ok(g.width >= minWidth && g.width >= Math.ceil((span + 1) / points));
      const asked = Math.max(minWidth, Math.ceil((span + 1) / points));
      const fitting = tiers.filter((t) => t <= asked);
      assert.equal(g.tier, fitting.length ? Math.max(...fitting) : null, 'the coarsest tier no coarser than asked');
      if (g.tier !== null) assert.equal(g.width % g.tier, 0, 'whole cells per bucket');
    }), { numRuns: 2000 });
});

test('tiers: raw below the finest cell, the coarsest cell that fits the asked resolution', () => {
  const day = 86_400_000;
  assert.equal(planGrid(0, day - 1, 500, { minWidth: 1, tiers: [3_600_000] }).tier, null, '173 s buckets read raw blocks');
  assert.equal(planGrid(0, 30 * day - 1, 500, { minWidth: 1, tiers: [3_600_000] }).tier, 3_600_000);
  assert.equal(planGrid(0, day - 1, 500, { minWidth: 10_000, tiers: [60_000, 3_600_000] }).tier, 60_000);
  assert.equal(planGrid(0, day - 1, 500, { minWidth: 10_000, tiers: [60_000, 3_600_000] }).width, 180_000);
  assert.equal(planGrid(0, 59_999, 1000, { minWidth: 10_000, tiers: [60_000] }).width, 10_000, 'never narrower than minWidth');
  assert.deepEqual(planGrid(0, 99, 10, { minWidth: 1, tiers: [] }), { start: 0, width: 10, count: 10, tier: null, from: 0, to: 99 });
  assert.deepEqual(planGrid(5, 5, 10, { minWidth: 1, tiers: [] }), { start: 5, width: 1, count: 1, tier: null, from: 5, to: 5 });
});
