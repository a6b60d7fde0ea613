import { brotliCompress, brotliCompressSync, brotliDecompressSync, constants as zlib, type BrotliOptions } from 'node:zlib';
import { InflateCache } from './inflate-cache.js';
import { ByteReader, ByteWriter } from './varint.js';

/**
 * The sealed block format: a set of rows (reports, or rollup cells) that share
 * timestamps, stored column by column, then compressed as a whole. Lossless:
 * the float64 written is the float64 read back, bit for bit (-0 included).
 *
 * Columns of values an agent reports are decimals at heart (31.4, 8589934592),
 * so a column is stored, when it can be without loss, as integer mantissas at
 * one decimal exponent (as VictoriaMetrics does), delta- or delta-of-delta-
 * coded and divided by the deltas' common factor (memory in KiB, disks in 4 KiB
 * pages). A column that is another column's complement to a constant (free =
 * total - used) costs nothing per row. What is left is zigzag varints, which
 * brotli squeezes further. A column whose steps follow another column's steps
 * (packets and bytes, percent and used) stores only how far each step is from
 * the other column's step times their ratio in this block. Anything else (NaN-free but not decimal: -0,
 * subnormals, 0.1 + 0.2) is kept as raw float64 bytes, byte-planed.
 *
 * Layout (before compression):
 *   uvarint FORMAT | uvarint n | timestamps | uvarint m | m columns
 *   timestamps: uvarint ts0, svarint delta1, n-2 svarint delta-of-delta
 *   column: uvarint id delta | byte kind (+0x80: presence bitmap follows) | [bitmap] | payload
 */
const FORMAT = 1;

const enum Kind {
  Constant = 1,
  Delta = 2,
  Complement = 3,
  Raw = 4,
  DeltaOfDelta = 5,
  Predicted = 6,
  /** One value for every row, as a decimal mantissa and exponent (a float64 costs 8 bytes, a count of 360 two). */
  ConstantDecimal = 7,
}

/** Rows sharing timestamps; a column holds NaN where a row has no value of that metric. */
export interface BlockData {
  ts: Float64Array;
  columns: Map<number, Float64Array>;
}

const POW10 = Array.from({ length: 16 }, (_, e) => 10 ** e);
/** Mantissas stay below 2^50 so that deltas and their zigzag stay exact integers. */
const MANTISSA_LIMIT = 2 ** 50;
const PARTIAL = 0x80;

/** The smallest decimal exponent at which v is an exact mantissa, or -1. */
export function decimalExponent(v: number): number {
  if (Object.is(v, -0) || !Number.isFinite(v)) return -1;
  for (let e = 0; e < POW10.length; e++) {
    const p = POW10[e]!;
    const m = Math.round(v * p);
    if (Math.abs(m) >= MANTISSA_LIMIT) return -1;
    if (m / p === v) return e;
  }
  return -1;
}

interface ColumnPlan {
  id: number;
  present: number[];
  values: Float64Array;
  exponent: number;
  mantissas: number[] | undefined;
  /** First differences of the mantissas, computed once: every later column tries this one as its predictor. */
  deltas?: Float64Array;
}

function deltasOf(plan: ColumnPlan): Float64Array {
  if (plan.deltas) return plan.deltas;
  const m = plan.mantissas!;
  const d = new Float64Array(Math.max(0, m.length - 1));
  for (let i = 1; i < m.length; i++) d[i - 1] = m[i]! - m[i - 1]!;
  return (plan.deltas = d);
}

/** The block's bytes before compression. */
function encodeColumns(block: BlockData): Uint8Array {
  const n = block.ts.length;
  const w = new ByteWriter(256 + n * 8);
  w.uvarint(FORMAT);
  w.uvarint(n);
  writeTimestamps(w, block.ts);
  // A column with no value at all says nothing: it is left out.
  const ids = [...block.columns.keys()].filter((id) => block.columns.get(id)!.some((v) => v === v)).sort((a, b) => a - b);
  w.uvarint(ids.length);
  const plans: ColumnPlan[] = [];
  let prevId = 0;
  for (const id of ids) {
    const plan = planColumn(id, block.columns.get(id)!);
    w.uvarint(id - prevId);
    prevId = id;
    const partial = plan.present.length < n;
    const complement = plan.mantissas ? findComplement(plan, plans) : undefined;
    let kind = complement ? Kind.Complement : chooseKind(plan);
    const predictor = kind === Kind.Delta || kind === Kind.DeltaOfDelta ? findPredictor(plan, plans, costOf(plan.mantissas!, kind === Kind.DeltaOfDelta)) : undefined;
    if (predictor) kind = Kind.Predicted;
    w.byte(kind | (partial ? PARTIAL : 0));
    if (partial) writeBitmap(w, plan.present, n);
    if (predictor) writePredicted(w, plan, predictor, plans[predictor.ref]!.mantissas!);
    else writePayload(w, kind, plan, complement);
    plans.push(plan);
  }
  return w.finish();
}

/**
 * Brotli quality of sealed blocks. On these varint streams qualities 4-9 all land within 0.1 % of each other; 10
 * (context modelling, a slow search) is 9 % smaller (0.924 -> 0.839 bytes a sample on the benchmark fleet) and decodes
 * within 10 % of 4's time. It costs about 10 ms a one-hour block, paid once per seal, in the thread pool
 * (encodeBlockAsync).
 */
const BLOCK_QUALITY = 10;
/**
 * For rollups: small, and encoded inside their transactions, where quality 10 took 1 ms (a host's hourly cell) to
 * 7 ms (a tenant's minute cells of an hour) for 3-4 % fewer bytes, 0.003 bytes a sample in all.
 */
export const FAST_QUALITY = 4;

export function encodeBlock(block: BlockData, quality = BLOCK_QUALITY): Uint8Array {
  const raw = encodeColumns(block);
  return brotliCompressSync(raw, compression(raw.length, quality));
}

/** encodeBlock with the compression (most of its time) in libuv's thread pool: the calling thread goes on meanwhile. */
export function encodeBlockAsync(block: BlockData, quality = BLOCK_QUALITY): Promise<Uint8Array> {
  const raw = encodeColumns(block);
  return new Promise((resolve, reject) => brotliCompress(raw, compression(raw.length, quality), (e, out) => (e ? reject(e) : resolve(out))));
}

/**
 * The window only as large as the input: the same output, without the default 4 MiB window's allocations in the
 * encoder and in every decoder that reads the block back.
 */
function compression(length: number, quality: number): BrotliOptions {
  return {
    params: {
      [zlib.BROTLI_PARAM_QUALITY]: quality,
      [zlib.BROTLI_PARAM_SIZE_HINT]: length,
      [zlib.BROTLI_PARAM_LGWIN]: Math.min(zlib.BROTLI_MAX_WINDOW_BITS, Math.max(zlib.BROTLI_MIN_WINDOW_BITS, Math.ceil(Math.log2(length + 1)))),
    },
  };
}

export function decodeBlock(bytes: Uint8Array): BlockData {
  const columns = new Map<number, Float64Array>();
  let n = 0;
  const ts = readBlock(brotliDecompressSync(bytes), (k) => new Float64Array(k), (id, src, exponent, rows) => {
    columns.set(id, scatter(n, rows, src, divisorOf(exponent)));
  }, (t) => { n = t.length; });
  return { ts, columns };
}

/**
 * Row i of a column holds `values[i] / divisorOf(exponent)`, or with `rows`, row `rows[i]` does and the others hold
 * nothing. `exponent`: the column's values are decimals of at most that many places, `values` their mantissas;
 * undefined for a column of arbitrary doubles, `values` the doubles. Division, not multiplication, is what reads a
 * decimal back exactly. `values` is read-only: a later column of the block may be decoded from it.
 */
export type ColumnVisitor = (id: number, values: Float64Array, exponent: number | undefined, rows: number[] | undefined) => void;

/** What a visited column's values are divided by (ColumnVisitor). */
export function divisorOf(exponent: number | undefined): number {
  return exponent === undefined ? 1 : POW10[exponent]!;
}

/**
 * Decodes a block for one pass over its columns (the bucketing of a query): the
 * block's timestamps are passed first, then each column, and none of the arrays
 * outlives the call. They live in one scratch area reused from block to block,
 * so a query that reads thousands of blocks allocates no column arrays.
 */
export function visitBlock(bytes: Uint8Array, visitTimestamps: (ts: Float64Array) => void, visitColumn: ColumnVisitor): void {
  areaUsed = 0;
  readBlock(inflateCache.inflate(bytes), areaArray, visitColumn, visitTimestamps);
}

let area = new Float64Array(1 << 14);
let areaUsed = 0;

function areaArray(k: number): Float64Array {
  if (areaUsed + k > area.length) {
    // Views already handed out keep the old area alive until the block is done.
    area = new Float64Array(Math.max(area.length * 2, k * 64));
    areaUsed = 0;
  }
  const out = area.subarray(areaUsed, areaUsed + k);
  areaUsed += k;
  return out;
}

/**
 * The blocks this thread's queries inflated lately (visitBlock; decodeBlock, for seals, goes around it). 4 MiB holds
 * about 110 host-hours of blocks at a 10 s interval: a host's week, or a day of four hosts.
 */
export const inflateCache = new InflateCache(4 << 20);

function readBlock(inflated: Uint8Array, alloc: (k: number) => Float64Array, visitColumn: ColumnVisitor, visitTimestamps?: (ts: Float64Array) => void): Float64Array {
  const r = new ByteReader(inflated);
  if (r.uvarint() !== FORMAT) throw new Error('unknown block format');
  const n = r.uvarint();
  const ts = readTimestamps(r, n, alloc(n));
  visitTimestamps?.(ts);
  const m = r.uvarint();
  const mantissaCols: Array<{ mantissas: Float64Array; exponent: number } | undefined> = [];
  let id = 0;
  for (let c = 0; c < m; c++) {
    id += r.uvarint();
    const head = r.byte();
    const kind = head & ~PARTIAL;
    const rows = head & PARTIAL ? readBitmap(r, n) : undefined;
    const k = rows ? rows.length : n;
    let mant: { mantissas: Float64Array; exponent: number } | undefined;
    if (kind === Kind.Constant || kind === Kind.ConstantDecimal) {
      let v: number;
      let exponent: number | undefined;
      if (kind === Kind.Constant) v = readFloat(r);
      else { exponent = r.uvarint(); v = r.svarint(); }
      visitColumn(id, alloc(k).fill(v), exponent, rows);
    } else if (kind === Kind.Raw) {
      visitColumn(id, readRaw(r, k, alloc(k)), undefined, rows);
    } else if (kind === Kind.Delta || kind === Kind.DeltaOfDelta || kind === Kind.Complement || kind === Kind.Predicted) {
      let mantissas: Float64Array;
      let exponent: number;
      if (kind === Kind.Complement) {
        const ref = mantissaCols[r.uvarint()];
        if (!ref) throw new Error('block complement refers to a missing column');
        const constant = r.svarint();
        exponent = ref.exponent;
        mantissas = alloc(k);
        for (let i = 0; i < k; i++) mantissas[i] = constant - ref.mantissas[i]!;
      } else if (kind === Kind.Predicted) {
        const ref = mantissaCols[r.uvarint()];
        if (!ref) throw new Error('block prediction refers to a missing column');
        exponent = r.uvarint();
        mantissas = readPredicted(r, k, ref.mantissas, alloc(k));
      } else {
        exponent = r.uvarint();
        mantissas = readMantissas(r, k, kind === Kind.DeltaOfDelta, alloc(k));
      }
      visitColumn(id, mantissas, exponent, rows);
      mant = { mantissas, exponent };
    } else {
      throw new Error(`unknown column kind ${kind}`);
    }
    mantissaCols.push(mant);
  }
  return ts;
}

/**
 * Values (mantissas over their power of ten) to their rows, NaN where a row has none. A complete column of
 * integers is `src` itself: the decoder's arrays are never written after decoding, so a mantissa column can be
 * shared with a column that refers to it.
 */
function scatter(n: number, rows: number[] | undefined, src: Float64Array, divisor: number): Float64Array {
  const k = src.length;
  if (!rows) {
    if (divisor === 1) return src;
    const out = new Float64Array(n);
    for (let i = 0; i < k; i++) out[i] = src[i]! / divisor;
    return out;
  }
  const out = new Float64Array(n).fill(Number.NaN);
  if (divisor === 1) for (let i = 0; i < k; i++) out[rows[i]!] = src[i]!;
  else for (let i = 0; i < k; i++) out[rows[i]!] = src[i]! / divisor;
  return out;
}

function planColumn(id: number, col: Float64Array): ColumnPlan {
  const present: number[] = [];
  for (let i = 0; i < col.length; i++) if (!Number.isNaN(col[i]!)) present.push(i);
  const values = present.length === col.length ? col : Float64Array.from(present, (i) => col[i]!);
  let exponent = 0;
  for (const v of values) {
    const e = decimalExponent(v);
    if (e < 0) { exponent = -1; break; }
    if (e > exponent) exponent = e;
  }
  let mantissas: number[] | undefined;
  if (exponent >= 0) {
    const p = POW10[exponent]!;
    mantissas = new Array<number>(values.length);
    for (let i = 0; i < values.length; i++) {
      const m = Math.round(values[i]! * p);
      // A value exact at a smaller exponent can still miss at a larger one: check every one.
      if (Math.abs(m) >= MANTISSA_LIMIT || m / p !== values[i]) { mantissas = undefined; break; }
      mantissas[i] = m;
    }
  }
  return { id, present, values, exponent, mantissas };
}

function chooseKind(plan: ColumnPlan): Kind {
  const v = plan.values;
  let constant = true;
  for (let i = 1; i < v.length && constant; i++) constant = Object.is(v[i], v[0]);
  if (constant && v.length > 0) return plan.mantissas ? Kind.ConstantDecimal : Kind.Constant;
  if (!plan.mantissas) return Kind.Raw;
  return costOf(plan.mantissas, true) < costOf(plan.mantissas, false) ? Kind.DeltaOfDelta : Kind.Delta;
}

/** Bytes the varints of a delta (or delta-of-delta) coding would take, divided by their common factor. */
function costOf(m: number[], dod: boolean): number {
  const d = differences(m, dod);
  const g = gcdOf(d);
  let bytes = 0;
  for (let i = 0; i < d.length; i++) bytes += varintBytes(Math.abs(d[i]! / g) * 2);
  return bytes;
}

function differences(m: number[], dod: boolean): Float64Array {
  const out = new Float64Array(Math.max(0, m.length - 1));
  let prev = m[0] ?? 0;
  let prevDelta = 0;
  for (let i = 1; i < m.length; i++) {
    const delta = m[i]! - prev;
    out[i - 1] = dod ? delta - prevDelta : delta;
    prev = m[i]!;
    prevDelta = delta;
  }
  return out;
}

function gcdOf(xs: Float64Array): number {
  let g = 0;
  for (let i = 0; i < xs.length; i++) {
    let a = Math.abs(xs[i]!);
    let b = g;
    while (b) { const t = a % b; a = b; b = t; }
    g = a;
    if (g === 1) return 1;
  }
  return g || 1;
}

function varintBytes(z: number): number {
  let n = 1;
  while (z >= 128) { z = Math.floor(z / 128); n++; }
  return n;
}

/** An earlier column whose mantissas sum with this one's to one constant on every row (used + free = total). */
function findComplement(plan: ColumnPlan, earlier: ColumnPlan[]): { ref: number; constant: number } | undefined {
  const m = plan.mantissas!;
  if (m.length < 2) return undefined;
  for (let r = 0; r < earlier.length; r++) {
    const other = earlier[r]!;
    const om = other.mantissas;
    if (!om || other.exponent !== plan.exponent || om.length !== m.length) continue;
    const constant = m[0]! + om[0]!;
    if (Math.abs(constant) >= MANTISSA_LIMIT) continue;
    // The sums first: almost every pair differs by the second row, and the rows' presence is compared only then
    // (comparing it first cost a pass over every row for every pair of columns: most of a seal's CPU).
    let all = true;
    for (let i = 1; i < m.length && all; i++) all = m[i]! + om[i]! === constant;
    if (!all || !samePresence(plan.present, other.present)) continue;
    // A constant pair is cheaper as two constants.
    if (m.some((x) => x !== m[0])) return { ref: r, constant };
  }
  return undefined;
}

function samePresence(a: number[], b: number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

interface Predictor {
  ref: number;
  ratio: number;
}

/**
 * The earlier complete column whose steps, times a least-squares ratio,
 * predict this column's steps well enough to beat `plainCost` bytes.
 */
function findPredictor(plan: ColumnPlan, earlier: ColumnPlan[], plainCost: number): Predictor | undefined {
  const m = plan.mantissas!;
  if (m.length < 3 || plan.present.length !== plan.values.length) return undefined;
  const dx = deltasOf(plan);
  let sxx = 0;
  for (let i = 0; i < dx.length; i++) sxx += dx[i]! * dx[i]!;
  let best: Predictor | undefined;
  let bestCost = plainCost * 0.9;
  for (let r = 0; r < earlier.length; r++) {
    const other = earlier[r]!;
    if (!other.mantissas || other.mantissas.length !== m.length || other.present.length !== other.values.length) continue;
    const dy = deltasOf(other);
    let sxy = 0;
    let syy = 0;
    for (let i = 0; i < dx.length; i++) { sxy += dx[i]! * dy[i]!; syy += dy[i]! * dy[i]!; }
    if (!syy || !Number.isFinite(sxy / syy)) continue;
    // Residuals keep a share 1 - r^2 of the steps' energy: below r^2 = 1/2 they are still over 0.7 of the steps,
    // under one bit shorter, and cannot win the 10 % below; the exact count (the loop below) is for the rest.
    if (sxy * sxy < 0.5 * sxx * syy) continue;
    const ratio = sxy / syy;
    let cost = 8;
    for (let i = 0; i < dx.length && cost < bestCost; i++) {
      const res = dx[i]! - Math.round(ratio * dy[i]!);
      cost += varintBytes(Math.abs(res) * 2);
    }
    if (cost < bestCost) { bestCost = cost; best = { ref: r, ratio }; }
  }
  return best;
}

function writePredicted(w: ByteWriter, plan: ColumnPlan, p: Predictor, source: number[]): void {
  const m = plan.mantissas!;
  w.uvarint(p.ref);
  w.uvarint(plan.exponent);
  writeFloat(w, p.ratio);
  w.svarint(m[0]!);
  for (let i = 1; i < m.length; i++) w.svarint(m[i]! - m[i - 1]! - Math.round(p.ratio * (source[i]! - source[i - 1]!)));
}

function readPredicted(r: ByteReader, k: number, source: Float64Array, out: Float64Array): Float64Array {
  const ratio = readFloat(r);
  if (k === 0) return out;
  out[0] = r.svarint();
  // The residuals land in out[1..k-1] in one pass over the bytes, each then turned into its value in place.
  r.svarints(out, k - 1, 1);
  for (let i = 1; i < k; i++) out[i] = out[i - 1]! + out[i]! + Math.round(ratio * (source[i]! - source[i - 1]!));
  return out;
}

function writePayload(w: ByteWriter, kind: Kind, plan: ColumnPlan, complement: { ref: number; constant: number } | undefined): void {
  if (kind === Kind.Constant) return writeFloat(w, plan.values[0]!);
  if (kind === Kind.ConstantDecimal) {
    w.uvarint(plan.exponent);
    w.svarint(plan.mantissas![0]!);
    return;
  }
  if (kind === Kind.Raw) return writeRaw(w, plan.values);
  if (kind === Kind.Complement) {
    w.uvarint(complement!.ref);
    w.svarint(complement!.constant);
    return;
  }
  const m = plan.mantissas!;
  w.uvarint(plan.exponent);
  w.svarint(m[0]!);
  const d = differences(m, kind === Kind.DeltaOfDelta);
  const g = gcdOf(d);
  w.uvarint(g);
  for (const x of d) w.svarint(x / g);
}

function readMantissas(r: ByteReader, k: number, dod: boolean, out: Float64Array): Float64Array {
  if (k === 0) return out;
  out[0] = r.svarint();
  const g = r.uvarint();
  // The steps land in out[1..k-1], each then turned into its value in place.
  r.svarints(out, k - 1, 1);
  if (dod) {
    let delta = 0;
    for (let i = 1; i < k; i++) { delta += out[i]! * g; out[i] = out[i - 1]! + delta; }
  } else {
    for (let i = 1; i < k; i++) out[i] = out[i - 1]! + out[i]! * g;
  }
  return out;
}

function writeTimestamps(w: ByteWriter, ts: Float64Array): void {
  if (!ts.length) return;
  w.uvarint(ts[0]!);
  let prevDelta = 0;
  for (let i = 1; i < ts.length; i++) {
    const delta = ts[i]! - ts[i - 1]!;
    w.svarint(i === 1 ? delta : delta - prevDelta);
    prevDelta = delta;
  }
}

function readTimestamps(r: ByteReader, n: number, ts: Float64Array): Float64Array {
  if (!n) return ts;
  ts[0] = r.uvarint();
  r.svarints(ts, n - 1, 1);
  let delta = 0;
  for (let i = 1; i < n; i++) {
    delta += ts[i]!;
    ts[i] = ts[i - 1]! + delta;
  }
  return ts;
}

function writeBitmap(w: ByteWriter, present: number[], n: number): void {
  const bits = new Uint8Array(Math.ceil(n / 8));
  for (const i of present) bits[i >> 3]! |= 1 << (i & 7);
  w.bytes(bits);
}

function readBitmap(r: ByteReader, n: number): number[] {
  const bits = r.bytes(Math.ceil(n / 8));
  const rows: number[] = [];
  for (let i = 0; i < n; i++) if (bits[i >> 3]! & (1 << (i & 7))) rows.push(i);
  return rows;
}

const scratch = new DataView(new ArrayBuffer(8));

function writeFloat(w: ByteWriter, v: number): void {
  scratch.setFloat64(0, v, true);
  for (let b = 0; b < 8; b++) w.byte(scratch.getUint8(b));
}

function readFloat(r: ByteReader): number {
  const b = r.bytes(8);
  for (let i = 0; i < 8; i++) scratch.setUint8(i, b[i]!);
  return scratch.getFloat64(0, true);
}

/** Byte planes (every value's byte 0, then every byte 1, ...): the exponent bytes repeat and compress. */
function writeRaw(w: ByteWriter, values: Float64Array): void {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  for (let b = 0; b < 8; b++) for (let i = 0; i < values.length; i++) w.byte(bytes[i * 8 + b]!);
}

function readRaw(r: ByteReader, k: number, out: Float64Array): Float64Array {
  const planes = r.bytes(k * 8);
  const bytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  for (let b = 0; b < 8; b++) for (let i = 0; i < k; i++) bytes[i * 8 + b] = planes[b * k + i]!;
  return out;
}
