import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BucketAccumulator, CrossHostAverager, bucketColumns, planBuckets, rawColumns } from '../../src/metrics/domain/downsample.js';

const row = (ts: number, pairs: Array<[number, number]>) => ({ ts, metricIds: pairs.map((p) => p[0]), values: pairs.map((p) => p[1]) });

test('planBuckets covers the inclusive range with at most `points` equal buckets', () => {
  assert.deepEqual(planBuckets(0, 99, 10), { from: 0, width: 10, count: 10 });
  assert.deepEqual(planBuckets(0, 100, 10), { from: 0, width: 11, count: 10 });
  assert.deepEqual(planBuckets(5, 5, 10), { from: 5, width: 1, count: 1 });
  assert.deepEqual(planBuckets(0, 99, 100, 30), { from: 0, width: 30, count: 4 });
  const p = planBuckets(1_699_920_000_000, 1_699_920_000_000 + 86_400_000, 500);
  assert.ok(p.count <= 500 && p.from + p.count * p.width > 1_699_920_000_000 + 86_400_000);
});

test('each bucket holds the per-metric mean of its raw points; empty buckets are dropped', () => {
  const acc = new BucketAccumulator(planBuckets(0, 39, 4));
  acc.add(row(0, [[1, 10], [2, 100]]));
  acc.add(row(9, [[1, 20]]));
  acc.add(row(25, [[1, 0.4], [2, 1]]));
  acc.add(row(29, [[1, 0.4]]));
  acc.add(row(40, [[1, 999]]));
  const cols = bucketColumns(acc.plan, acc.means());
  assert.deepEqual(cols.timestamps, [0, 20]);
  assert.deepEqual(cols.metrics.get(1), [15, 0.4]);
  assert.deepEqual(cols.metrics.get(2), [100, 1]);
});

test('raw columns align metrics on report times with null gaps', () => {
  const cols = rawColumns([row(1, [[1, 5]]), row(2, [[2, 7]]), row(3, [[1, 6], [2, 8]])]);
  assert.deepEqual(cols.timestamps, [1, 2, 3]);
  assert.deepEqual(cols.metrics.get(1), [5, null, 6]);
  assert.deepEqual(cols.metrics.get(2), [null, 7, 8]);
});

test('the cross-host average weighs each host once per bucket, whatever its report count', () => {
  const plan = planBuckets(0, 19, 2);
  const a = new BucketAccumulator(plan);
  for (let t = 0; t < 10; t++) a.add(row(t, [[1, 10]]));
  const b = new BucketAccumulator(plan);
  b.add(row(5, [[1, 30]]));
  b.add(row(15, [[1, 50]]));
  const fleet = new CrossHostAverager(plan.count);
  fleet.add(a.means());
  fleet.add(b.means());
  assert.deepEqual([...fleet.means().get(1)!], [20, 50]);
});
