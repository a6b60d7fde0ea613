import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeSamples, encodeSamples } from '../../src/metrics/storage/sample-codec.js';

test('packed samples round-trip ids (sorted) and full float64 values', () => {
  const buf = encodeSamples([300, 2, 2 ** 31, 70_000], [1.5, 1_099_511_627_776 + 0.25, -0, 1e-300]);
  const { metricIds, values } = decodeSamples(buf);
  assert.deepEqual([...metricIds], [2, 300, 70_000, 2 ** 31]);
  assert.deepEqual([...values], [1_099_511_627_776.25, 1.5, 1e-300, -0]);
});

test('agent-style decimals pack into a few bytes each; anything else keeps its float64', () => {
  const decimals = [30.9, 2.05, 65.5, 0, -12.25, 17_179_869_184, 1_433_882_947_584, 906_063_699];
  const buf = encodeSamples(decimals.map((_, i) => i + 1), decimals);
  // 2 format bytes, the count, 8 one-byte id deltas, then 2+2+3+1+3+6+7+5 bytes of values (plain float64s: 64).
  assert.equal(buf.length, 2 + 1 + 8 + 29);
  assert.deepEqual([...decodeSamples(buf).values], decimals);
  const raw = [Math.PI, 0.1 + 0.2, 2 ** 60, 5e-324];
  assert.equal(encodeSamples([1, 2, 3, 4], raw).length, 2 + 1 + 4 + raw.length * 9);
  assert.deepEqual([...decodeSamples(encodeSamples([1, 2, 3, 4], raw)).values], raw);
});

test('the benchmark fleet\'s report packs into 143 bytes, 5.1 a sample (plain float64s: 255)', () => {
  const report = [30.9, 36.9, 21.6, 34.6, 36.7, 36.9, 35, 32.8, 35.3, 2.05, 2.05, 2.05, 17_179_869_184, 11_258_236_928,
    5_921_632_256, 65.5, 53_687_091_200, 23_070_736_384, 30_616_354_816, 43, 2_147_483_648_000, 1_433_882_947_584,
    713_600_700_416, 66.8, 928_074_537_265, 116_873_431_816, 906_063_699, 114_101_583];
  const buf = encodeSamples(report.map((_, i) => i + 1), report);
  assert.equal(buf.length, 143);
  assert.deepEqual([...decodeSamples(buf).values], report);
});

test('random doubles, decimals, extremes, -0 and subnormals come back bit for bit', () => {
  let seed = 11;
  const rand = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const pick = (): number => {
    switch (Math.floor(rand() * 8)) {
      case 0: return (rand() - 0.5) * 10 ** Math.floor(rand() * 40 - 20);
      case 1: return Math.round((rand() - 0.5) * 10 ** Math.floor(rand() * 16)) / 10 ** Math.floor(rand() * 6);
      case 2: return Number.MAX_VALUE * (rand() < 0.5 ? -1 : 1);
      case 3: return Number.MIN_VALUE * Math.ceil(rand() * 1000);
      case 4: return rand() < 0.5 ? -0 : 0;
      case 5: return Math.floor(rand() * 2 ** 53) * (rand() < 0.5 ? -1 : 1);
      case 6: return (2 ** 47 - 1) * (rand() < 0.5 ? -1 : 1) + Math.floor(rand() * 3);
      default: return Math.round(rand() * 1e6) / 100;
    }
  };
  for (let round = 0; round < 500; round++) {
    const values = Array.from({ length: 1 + Math.floor(rand() * 40) }, pick);
    const ids = values.map((_, i) => i * 3 + 1);
    const back = decodeSamples(encodeSamples(ids, values));
    assert.deepEqual([...back.metricIds], ids);
    back.values.forEach((v, i) => assert.ok(Object.is(v, values[i]), `${values[i]} came back as ${v}`));
  }
});

test('head rows written in the first layout (plain float64s) still decode', () => {
  const first = Buffer.alloc(1 + 2 + 2 * 8);
  first[0] = 2; first[1] = 3; first[2] = 4; // ids 3 and 7
  first.writeDoubleLE(1.5, 3);
  first.writeDoubleLE(-0, 11);
  const { metricIds, values } = decodeSamples(first);
  assert.deepEqual([...metricIds], [3, 7]);
  assert.ok(values[0] === 1.5 && Object.is(values[1], -0));
  assert.deepEqual(decodeSamples(Buffer.from([0])), { metricIds: new Uint32Array(0), values: new Float64Array(0) });
  const padded = Buffer.concat([first, Buffer.from([0])]);
  assert.throws(() => decodeSamples(padded), /wrong length/);
});

test('a truncated or padded vector is an error, never a wrong value', () => {
  const buf = encodeSamples([1, 2], [1, Math.PI]);
  assert.throws(() => decodeSamples(buf.subarray(0, buf.length - 1)), /truncated/);
  assert.throws(() => decodeSamples(Buffer.concat([buf, Buffer.from([0])])), /wrong length/);
  assert.throws(() => decodeSamples(Buffer.from([0x80])), /truncated/);
  assert.throws(() => decodeSamples(Buffer.from([0, 9, 0])), /unknown format/);
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
