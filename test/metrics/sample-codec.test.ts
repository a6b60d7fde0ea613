import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeSamples, encodeSamples } from '../../src/metrics/storage/sample-codec.js';

test('packed samples round-trip ids (sorted) and full float64 values', () => {
  const buf = encodeSamples([[300, 1.5], [2, 1_099_511_627_776 + 0.25], [2 ** 31, -0], [70_000, 1e-300]]);
  const { metricIds, values } = decodeSamples(buf);
  assert.deepEqual([...metricIds], [2, 300, 70_000, 2 ** 31]);
  assert.deepEqual([...values], [1_099_511_627_776.25, 1.5, 1e-300, -0]);
});

test('28 metrics with small ids pack into about 9 bytes per sample', () => {
  const buf = encodeSamples(Array.from({ length: 28 }, (_, i) => [i + 1, i * 1.1] as [number, number]));
  assert.equal(buf.length, 1 + 28 + 28 * 8);
});

test('a truncated or padded vector is an error, never a wrong value', () => {
  const buf = encodeSamples([[1, 1], [2, 2]]);
  assert.throws(() => decodeSamples(buf.subarray(0, buf.length - 1)), /wrong length/);
  assert.throws(() => decodeSamples(Buffer.from([0x80])), /truncated/);
});
