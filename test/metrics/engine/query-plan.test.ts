import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { gridEnd, planGrid } from '../../../src/metrics/storage/engine/query-plan.js';

test('the grid is aligned to multiples of its width, covers [from, to], and never passes the budget (property)', () => {
  fc.assert(fc.property(
    fc.integer({ min: 0, max: 2 ** 42 }), fc.integer({ min: 0, max: 90 * 86_400_000 }), fc.integer({ min: 1, max: 10_000 }),
    fc.constantFrom([] as number[], [60_000, 3_600_000], [3_600_000]), fc.constantFrom(1, 10_000),
    (from, span, points, tiers, unit) => {
      const to = from + span;
      const g = planGrid(from, to, points, { unit, tiers });
      assert.ok(g.count <= points && g.count >= 1);
      assert.equal(g.start % g.width, 0);
      assert.ok(g.start <= from && gridEnd(g) > to);
      assert.ok(g.from === from && g.to === to, 'the grid carries the range its buckets are clipped to');
      assert.ok(g.width >= Math.ceil((span + 1) / points));
      assert.equal(g.width % unit, 0, 'a whole number of units');
      const asked = Math.max(unit, Math.ceil((span + 1) / points));
      const fitting = tiers.filter((t) => t <= asked);
      if (fitting.length) assert.ok(g.tier !== null && g.tier >= Math.max(...fitting), 'no finer than the coarsest tier no coarser than asked');
      if (g.tier !== null) assert.ok(g.tier <= g.width && g.width % g.tier === 0, 'whole cells per bucket');
      else assert.ok(tiers.every((t) => t > g.width), 'raw only when no tier fits the width');
    }), { numRuns: 2000 });
});

test('tiers: raw below the finest cell, the coarsest cell that fits the asked resolution', () => {
  const day = 86_400_000;
  assert.equal(planGrid(0, day - 1, 500, { unit: 1, tiers: [3_600_000] }).tier, null, '173 s buckets read raw blocks');
  assert.equal(planGrid(0, 30 * day - 1, 500, { unit: 1, tiers: [3_600_000] }).tier, 3_600_000);
  assert.equal(planGrid(0, day - 1, 500, { unit: 10_000, tiers: [60_000, 3_600_000] }).tier, 60_000);
  assert.equal(planGrid(0, day - 1, 500, { unit: 10_000, tiers: [60_000, 3_600_000] }).width, 180_000);
  assert.equal(planGrid(0, 59_999, 1000, { unit: 10_000, tiers: [60_000] }).width, 10_000, 'never narrower than the unit');
  assert.deepEqual(planGrid(0, 99, 10, { unit: 1, tiers: [] }), { start: 0, width: 10, count: 10, tier: null, from: 0, to: 99 });
  assert.deepEqual(planGrid(5, 5, 10, { unit: 1, tiers: [] }), { start: 5, width: 1, count: 1, tier: null, from: 5, to: 5 });
});

test('below the finest tier the aggregate\'s buckets are whole multiples of its 10 s unit, and one that reaches a tier reads it', () => {
  const sixHours = 6 * 3_600_000;
  // 43.2 s asked: 50 s buckets, so a host every 10 s has 5 samples in each (43.2 s buckets would hold 4 or 5).
  assert.deepEqual(planGrid(0, sixHours - 1, 500, { unit: 10_000, tiers: [60_000, 3_600_000] }), { start: 0, width: 50_000, count: 432, tier: null, from: 0, to: sixHours - 1 });
  assert.equal(planGrid(0, sixHours - 1, 500, { unit: 1, tiers: [3_600_000] }).width, 43_200, 'a host series keeps its width');
  // 55 s asked: rounded to 60 s, which is the fine tier's cell.
  assert.equal(planGrid(0, 500 * 55_000 - 1, 500, { unit: 10_000, tiers: [60_000, 3_600_000] }).tier, 60_000);
});
