import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mergeRows } from '../../../src/metrics/storage/engine/sealer.js';
import { encodeSamples } from '../../../src/metrics/storage/sample-codec.js';

/** Columns as plain arrays, NaN (no value) as null, for comparison. */
const plain = (columns: Map<number, Float64Array>) => Object.fromEntries([...columns].map(([id, col]) => [id, [...col].map((v) => (Number.isNaN(v) ? null : v))]));

test('a block and head rows merge by ts: the sealed row wins a shared ts, gaps stay gaps, a new metric gets its own column', () => {
  const block = { ts: Float64Array.from([10, 30]), columns: new Map([[1, Float64Array.from([1, Number.NaN])], [2, Float64Array.from([5, 6])]]) };
  const head = [
    { ts: 5, samples: encodeSamples([2, 1], [50, 10]) },
    { ts: 20, samples: encodeSamples([3, 1], [7, 2]) },
    // Already sealed: the block's values stay, this row's are dropped.
    { ts: 30, samples: encodeSamples([1, 2], [99, 99]) },
  ];
  const merged = mergeRows(block, head);
  assert.deepEqual([...merged.ts], [5, 10, 20, 30]);
  assert.deepEqual(plain(merged.columns), { 1: [10, 1, 2, null], 2: [50, 5, null, 6], 3: [null, null, 7, null] });
});

test('head rows alone, out of order and with a ts twice, become one sorted block', () => {
  const merged = mergeRows(undefined, [
    { ts: 20, samples: encodeSamples([1], [2]) },
    { ts: 10, samples: encodeSamples([1], [1]) },
    { ts: 20, samples: encodeSamples([1], [3]) },
  ]);
  assert.deepEqual([...merged.ts], [10, 20]);
  assert.deepEqual(plain(merged.columns), { 1: [1, 2] });
});
