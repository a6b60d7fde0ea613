import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decimalExponent, decodeBlock, encodeBlock, type BlockData } from '../../../src/metrics/storage/engine/block-codec.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

/** Bit-for-bit equality: -0 is not 0, and absent stays absent (a column with no value at all is left out). */
function assertSame(a: BlockData, b: BlockData): void {
  a = { ts: a.ts, columns: new Map([...a.columns].filter(([, col]) => col.some((v) => !Number.isNaN(v)))) };
  assert.deepEqual([...b.ts], [...a.ts]);
  assert.deepEqual([...b.columns.keys()].sort((x, y) => x - y), [...a.columns.keys()].sort((x, y) => x - y));
  for (const [id, col] of a.columns) {
    const got = b.columns.get(id)!;
    for (let i = 0; i < col.length; i++) assert.ok(Object.is(got[i], col[i]), `metric ${id} row ${i}: wrote ${col[i]}, read ${got[i]}`);
  }
}

const anyFinite = fc.double({ noNaN: true, noDefaultInfinity: true });
const decimal = fc.tuple(fc.integer({ min: -1_000_000_000, max: 1_000_000_000 }), fc.integer({ min: 0, max: 4 })).map(([m, e]) => Number((m / 10 ** e).toFixed(e)));
const counter = fc.array(fc.integer({ min: 0, max: 2 ** 40 }), { minLength: 1, maxLength: 1 });
const value = fc.oneof(anyFinite, decimal, fc.constantFrom(-0, 0, Number.MIN_VALUE, -Number.MIN_VALUE, 2.2250738585072014e-308, Number.MAX_VALUE, -Number.MAX_VALUE, 2 ** 53, 0.1 + 0.2));

/** Timestamps ascending with random gaps and jitter, starting anywhere in a plausible epoch range. */
const timestamps = fc.tuple(fc.integer({ min: 0, max: 2 ** 45 }), fc.array(fc.oneof(fc.constant(10_000), fc.integer({ min: 1, max: 10_000_000 }), fc.integer({ min: 9_800, max: 10_200 })), { minLength: 0, maxLength: 400 }))
  .map(([start, gaps]) => { const ts = [start]; for (const g of gaps) ts.push(ts[ts.length - 1]! + g); return Float64Array.from(ts); });

const block = timestamps.chain((ts) => fc.array(
  fc.tuple(fc.integer({ min: 0, max: 5_000 }), fc.oneof(
    fc.array(value, { minLength: ts.length, maxLength: ts.length }),
    fc.array(fc.option(value, { nil: Number.NaN }), { minLength: ts.length, maxLength: ts.length }),
    fc.array(decimal, { minLength: ts.length, maxLength: ts.length }),
  )), { maxLength: 12 },
).map((cols) => ({ ts, columns: new Map(cols.map(([id, vals]) => [id, Float64Array.from(vals)])) })));

test('a block reads back every float64 it was given, bit for bit (property)', () => {
  fc.assert(fc.property(block, (b) => assertSame(b, decodeBlock(encodeBlock(b)))), { numRuns: RUNS });
});

test('random walks, counters and complements (free = total - used) round-trip and compress below 2 bytes a sample', () => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 2 ** 31 }), counter, (seed, [start]) => {
    let s = seed;
    const rnd = () => { s = (s * 1103515245 + 12345) % 2 ** 31; return s / 2 ** 31; };
    const n = 360;
    const ts = Float64Array.from({ length: n }, (_, i) => 1_700_000_000_000 + i * 10_000 + Math.floor(rnd() * 200));
    const total = 17_179_869_184;
    let used = total / 2;
    let bytes = start!;
    const cpu = new Float64Array(n);
    const usedCol = new Float64Array(n);
    const freeCol = new Float64Array(n);
    const rx = new Float64Array(n);
    const pkts = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      cpu[i] = Math.round(rnd() * 1000) / 10;
      used = Math.max(0, used + Math.round((rnd() - 0.5) * 1e6) * 1024);
      usedCol[i] = used;
      freeCol[i] = total - used;
      bytes += Math.round(rnd() * 1e6);
      rx[i] = bytes;
      pkts[i] = Math.round(bytes / 1400);
    }
    const b: BlockData = { ts, columns: new Map([[1, cpu], [2, new Float64Array(n).fill(total)], [3, usedCol], [4, freeCol], [5, rx], [6, pkts]]) };
    const enc = encodeBlock(b);
    assertSame(b, decodeBlock(enc));
    assert.ok(enc.length / (n * 6) < 2, `${enc.length / (n * 6)} bytes a sample`);
  }), { numRuns: 20 });
});

test('a column whose steps follow another column\'s (bytes and packets) costs only its residuals; unrelated columns pay their own steps', () => {
  let s = 7;
  const rnd = () => { s = (s * 1103515245 + 12345) % 2 ** 31; return s / 2 ** 31; };
  const n = 360;
  const ts = Float64Array.from({ length: n }, (_, i) => 1_700_000_000_000 + i * 10_000);
  const walk = (step: () => number) => { let v = 0; return Float64Array.from({ length: n }, () => (v += step())); };
  const packets = walk(() => 10 + Math.floor(rnd() * 40));
  // Bytes: about 1,400 per packet, within 30 bytes: steps of 14,000-70,000 that a ratio to packets' steps predicts.
  const bytes = new Float64Array(n);
  for (let i = 0; i < n; i++) bytes[i] = Math.round(packets[i]! * 1400 + rnd() * 30);
  const unrelated = walk(() => 14_000 + Math.floor(rnd() * 56_000));
  const size = (other: Float64Array) => {
    const b: BlockData = { ts, columns: new Map([[1, packets], [2, other]]) };
    const enc = encodeBlock(b);
    assertSame(b, decodeBlock(enc));
    return enc.length;
  };
  const predicted = size(bytes);
  const alone = size(unrelated);
  assert.ok(predicted < alone * 0.7, `bytes beside packets: ${predicted} B; an unrelated walk of the same size: ${alone} B`);
});

test('constant columns are stored as decimals where exact (a host-hour rollup row: sums, counts, min, max) and read back exactly', () => {
  const row = [18_012.37, 360, 12.5, 99.99, 3.6e12, 360, 9_999_999_744, 10_000_001_024, 0.1 + 0.2, -0];
  const b: BlockData = { ts: Float64Array.of(1_700_000_000_000), columns: new Map(row.map((v, i) => [i, Float64Array.of(v)])) };
  const enc = encodeBlock(b);
  assertSame(b, decodeBlock(enc));
  // A count of 360 takes a few bytes; a constant with no exact decimal (0.1 + 0.2) still takes a float64's eight.
  const one = (v: number) => encodeBlock({ ts: b.ts, columns: new Map([[1, Float64Array.of(v)]]) }).length;
  assert.ok(one(360) + 4 <= one(0.1 + 0.2), `${one(360)} bytes against ${one(0.1 + 0.2)}`);
  // Partial constant columns keep their gaps.
  const partial: BlockData = { ts: Float64Array.of(0, 10_000, 20_000), columns: new Map([[1, Float64Array.of(360, Number.NaN, 360)], [2, Float64Array.of(Number.NaN, 0.25, 0.25)]]) };
  assertSame(partial, decodeBlock(encodeBlock(partial)));
});

test('decimalExponent: the smallest exact decimal exponent, or -1 where none is exact', () => {
  assert.equal(decimalExponent(31.4), 1);
  assert.equal(decimalExponent(8_589_934_592), 0);
  assert.equal(decimalExponent(0.05), 2);
  assert.equal(decimalExponent(-0), -1, '-0 would read back as 0');
  assert.equal(decimalExponent(0.1 + 0.2), -1);
  assert.equal(decimalExponent(Number.MIN_VALUE), -1);
  assert.equal(decimalExponent(2 ** 60), -1, 'beyond the exact mantissa range');
});

test('an empty block and a block of one row round-trip', () => {
  assertSame({ ts: new Float64Array(), columns: new Map() }, decodeBlock(encodeBlock({ ts: new Float64Array(), columns: new Map() })));
  const one = { ts: Float64Array.of(5), columns: new Map([[7, Float64Array.of(-0)], [9, Float64Array.of(1e308)]]) };
  assertSame(one, decodeBlock(encodeBlock(one)));
});

test('a corrupt block is an error, not a wrong answer', () => {
  const enc = encodeBlock({ ts: Float64Array.of(1, 2), columns: new Map([[1, Float64Array.of(1, 2)]]) });
  assert.throws(() => decodeBlock(enc.subarray(0, enc.length - 3)));
});
