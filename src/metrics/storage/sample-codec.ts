import { decimalExponent } from './engine/block-codec.js';

/**
 * The packed value vector of one stored report in the head: a row per report
 * instead of a row per sample (see docs/metrics-api.md, "Storage"). Written:
 *
 *   0x00 0x01 | varint n | n varints: metric ids ascending, delta-encoded | n values
 *
 * A value is one varint `zigzag(m) * 16 + e` when it is exactly the decimal
 * m / 10^e (e < 15, |m| < 2^47: what agents report, 31.4 or 8589934592, in
 * one to seven bytes), else the varint 15 and its float64 LE bytes (any other
 * double, -0 included): lossless either way. A report of 28 metrics packs into
 * about 150 bytes instead of 260 as plain float64s, and the head is where
 * every report's bytes are written and committed first.
 *
 * Still read: the first layout, `varint n | ids | n float64 LE` (head rows
 * written before it). The two cannot be confused: the first layout starts
 * with 0x00 only for an empty report, which is that single byte.
 */
export interface PackedSamples {
  metricIds: Uint32Array;
  values: Float64Array;
}

const DECIMAL_FORMAT = 1;
const RAW = 15;
const MANTISSA_LIMIT = 2 ** 47;
const POW10 = Array.from({ length: RAW }, (_, e) => 10 ** e);

// Scratch reused from report to report: this runs once per stored report, on one thread, never re-entered.
let order = new Uint32Array(64);
let codes = new Float64Array(64);

/**
 * Packs `values[i]` under metric id `ids[i]` (ids distinct, in any order). Written straight into one buffer: the
 * buffer is the only allocation that outlives the call.
 */
export function encodeSamples(ids: ArrayLike<number>, values: ArrayLike<number>): Buffer {
  const n = ids.length;
  if (order.length < n) { order = new Uint32Array(n); codes = new Float64Array(n); }
  // Insertion sort of positions by id: a report's ids mostly arrive ascending already.
  for (let i = 0; i < n; i++) {
    let j = i;
    while (j > 0 && ids[order[j - 1]!]! > ids[i]!) { order[j] = order[j - 1]!; j--; }
    order[j] = i;
  }
  let length = 2 + varintLength(n);
  let prev = 0;
  for (let i = 0; i < n; i++) { const id = ids[order[i]!]!; length += varintLength(id - prev); prev = id; }
  for (let i = 0; i < n; i++) {
    const code = decimalCode(values[order[i]!]!);
    codes[i] = code;
    length += code === RAW ? 9 : varintLength(code);
  }
  const buf = Buffer.allocUnsafe(length);
  buf[0] = 0;
  buf[1] = DECIMAL_FORMAT;
  let pos = writeVarint(buf, 2, n);
  prev = 0;
  for (let i = 0; i < n; i++) { const id = ids[order[i]!]!; pos = writeVarint(buf, pos, id - prev); prev = id; }
  for (let i = 0; i < n; i++) {
    const code = codes[i]!;
    pos = writeVarint(buf, pos, code);
    if (code === RAW) pos = buf.writeDoubleLE(values[order[i]!]!, pos);
  }
  return buf;
}

/** `zigzag(m) * 16 + e` for v = m / 10^e exactly, or RAW. At most 2^52: an exact integer. */
function decimalCode(v: number): number {
  // Integers (counters, byte sizes) are a third of a report: no search for them.
  if (Number.isInteger(v) && Math.abs(v) < MANTISSA_LIMIT && !Object.is(v, -0)) return (v >= 0 ? v * 2 : -v * 2 - 1) * 16;
  const e = decimalExponent(v);
  if (e < 0 || e >= RAW) return RAW;
  const m = Math.round(v * POW10[e]!);
  if (Math.abs(m) >= MANTISSA_LIMIT) return RAW;
  return (m >= 0 ? m * 2 : -m * 2 - 1) * 16 + e;
}

export function decodeSamples(buf: Uint8Array): PackedSamples {
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let pos = 0;
  const read = () => {
    let value = 0;
    let shift = 1;
    for (;;) {
      const byte = view[pos++];
      if (byte === undefined) throw new Error('packed samples truncated');
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
      shift *= 128;
    }
  };
  const decimal = view.length > 1 && view[0] === 0;
  if (decimal) {
    if (view[1] !== DECIMAL_FORMAT) throw new Error(`packed samples of an unknown format ${view[1]}`);
    pos = 2;
  }
  const n = read();
  const metricIds = new Uint32Array(n);
  let id = 0;
  for (let i = 0; i < n; i++) metricIds[i] = id += read();
  const values = new Float64Array(n);
  if (!decimal) {
    if (view.length !== pos + n * 8) throw new Error('packed samples have the wrong length');
    for (let i = 0; i < n; i++) values[i] = view.readDoubleLE(pos + i * 8);
    return { metricIds, values };
  }
  for (let i = 0; i < n; i++) {
    const code = read();
    const e = code % 16;
    if (e === RAW) {
      if (pos + 8 > view.length) throw new Error('packed samples truncated');
      values[i] = view.readDoubleLE(pos);
      pos += 8;
      continue;
    }
    const zz = (code - e) / 16;
    const m = zz % 2 === 0 ? zz / 2 : -(zz + 1) / 2;
    // Division, not multiplication, reads a decimal back exactly (the encoder checked this very operation).
    values[i] = e === 0 ? m : m / POW10[e]!;
  }
  if (pos !== view.length) throw new Error('packed samples have the wrong length');
  return { metricIds, values };
}

function varintLength(n: number): number {
  let len = 1;
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) len++;
  return len;
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  let pos = at;
  let v = n;
  while (v >= 0x80) {
    buf[pos++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}
