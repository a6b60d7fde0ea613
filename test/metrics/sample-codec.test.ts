import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeSamples, encodeSamples } from '../../src/metrics/storage/sample-codec.js';

test('packed samples round-trip ids (sorted) and full float64 values', () => {
  const buf = encodeSamples([300, 2, 2 ** 31, 70_000], [1.5, 1_099_511_627_776 + 0.25, -0, 1e-300]);
  const { metricIds, values } = decodeSamples(buf);
  assert.deepEqual([...metricIds], [2, 300, 70_000, 2 ** 31]);
  assert.deepEqual([...values], [1_099_511_627_776.25, 1.5, 1e-300, -0]);
});

test('28 metrics with small ids pack into about 9 bytes per sample', () => {
  const buf = encodeSamples(Array.from({ length: 28 }, (_, i) => i + 1), Array.from({ length: 28 }, (_, i) => i * 1.1));
  assert.equal(buf.length, 1 + 28 + 28 * 8);
});

test('a truncated or padded vector is an error, never a wrong value', () => {
  const buf = encodeSamples([1, 2], [1, 2]);
  assert.throws(() => decodeSamples(buf.subarray(0, buf.length - 1)), /wrong length/);
  assert.throws(() => decodeSamples(Buffer.from([0x80])), /truncated/);
});

test('any order of ids packs the same as ascending order', () => {
  let seed = 7;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const ids = [...new Set(Array.from({ length: 200 }, () => Math.floor(rand() * 2 ** 20)))];
  const values = ids.map(() => rand() * 1e9);
  const order = ids.map((_, i) => i).sort((a, b) => ids[a]! - ids[b]!);
  const ascending = encodeSamples(order.map((i) => ids[i]!), order.map((i) => values[i]!));
  assert.deepEqual(encodeSamples(ids, values), ascending);
  const { metricIds, values: back } = decodeSamples(ascending);
  assert.deepEqual([...metricIds], order.map((i) => ids[i]));
  assert.deepEqual([...back], order.map((i) => values[i]));
});
