import { decimalExponent, divisorOf, encodeBlock, encodeBlockAsync, FAST_QUALITY, visitBlock, type BlockData } from './block-codec.js';

/**
 * Rollup tiers: per metric and per cell of a fixed width (aligned to epoch
 * multiples of it), the sum, count, min and max of the raw values in the
 * cell. Sums and counts add up exactly, so a bucket made of whole cells has
 * exactly the mean of its raw values; min and max give the band. A rollup is
 * stored as a block (block-codec.ts) whose rows are cells and whose column
 * `id * 4 + stat` holds one statistic of metric `id`.
 */
export interface Rollup {
  /** Cell starts, ascending. */
  cells: Float64Array;
  width: number;
  /** Metric id -> one value per cell each (count 0 and NaN sums where a cell holds no value of the metric). */
  metrics: Map<number, CellStats>;
}

export interface CellStats {
  sum: Float64Array;
  count: Float64Array;
  min: Float64Array;
  max: Float64Array;
}

/** Columns per metric in a stored rollup, in this order: sum, count, min, max. */
export const ROLLUP_STATS = 4;
export const SUM = 0;
export const COUNT = 1;
export const MIN = 2;
export const MAX = 3;

/** Cells of `width` over the rows of one block (or several, merged), for every metric. */
export function rollUp(block: BlockData, width: number): Rollup {
  const n = block.ts.length;
  const cellOf = new Int32Array(n);
  const starts: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = Math.floor(block.ts[i]! / width) * width;
    if (starts.length === 0 || starts[starts.length - 1] !== start) starts.push(start);
    cellOf[i] = starts.length - 1;
  }
  const c = starts.length;
  const metrics = new Map<number, CellStats>();
  for (const [id, col] of block.columns) {
    const s = emptyStats(c);
    const digits = new DecimalDigits();
    for (let i = 0; i < n; i++) {
      const v = col[i]!;
      if (Number.isNaN(v)) continue;
      addToCell(s, cellOf[i]!, v);
      digits.see(v);
    }
    digits.tidy(s.sum);
    metrics.set(id, s);
  }
  return { cells: Float64Array.from(starts), width, metrics };
}

/**
 * The cells of `width` over the blocks of several hosts for the window at
 * `windowStart`, summed over the hosts: what merging every block's rollUp
 * gives (a tenant's rollup), folded column by column from the decoder's
 * scratch area instead of an array per host, metric and statistic. A tenant
 * of a thousand hosts is a thousand blocks per window.
 */
export function rollUpBlocks(blocks: readonly Uint8Array[], windowStart: number, windowMs: number, width: number): Rollup {
  const c = Math.ceil(windowMs / width);
  const seen = new Uint8Array(c);
  const metrics = new Map<number, { s: CellStats; digits: DecimalDigits }>();
  let cellOf = new Int32Array(0);
  for (const bytes of blocks) {
    visitBlock(bytes, (ts) => {
      cellOf = Int32Array.from(ts, (t) => Math.floor((t - windowStart) / width));
      for (const k of cellOf) {
        if (!(k >= 0 && k < c)) throw new Error(`a block row at ${windowStart + k * width} lies outside its window ${windowStart}`);
        seen[k] = 1;
      }
    }, (id, values, exponent, rows) => {
      const divisor = divisorOf(exponent);
      let m = metrics.get(id);
      if (!m) metrics.set(id, (m = { s: emptyStats(c), digits: new DecimalDigits() }));
      const { s, digits } = m;
      if (exponent !== undefined) digits.seeExponent(exponent);
      for (let i = 0; i < values.length; i++) {
        const v = values[i]! / divisor;
        if (Number.isNaN(v)) continue;
        addToCell(s, cellOf[rows ? rows[i]! : i]!, v);
        if (exponent === undefined) digits.see(v);
      }
    });
  }
  const kept: number[] = [];
  for (let k = 0; k < c; k++) if (seen[k]) kept.push(k);
  const pick = (a: Float64Array) => Float64Array.from(kept, (k) => a[k]!);
  const out = new Map<number, CellStats>();
  for (const [id, { s, digits }] of metrics) {
    const sum = pick(s.sum);
    digits.tidy(sum);
    out.set(id, { sum, count: pick(s.count), min: pick(s.min), max: pick(s.max) });
  }
  return { cells: Float64Array.from(kept, (k) => windowStart + k * width), width, metrics: out };
}

/**
 * Float addition leaves noise (0.1 + 0.2) that would turn a decimal sum into
 * an incompressible float; summands of at most e decimals have a sum of at
 * most e decimals, so rounding to e restores the exact decimal sum.
 */
class DecimalDigits {
  private e = 0;

  see(v: number): void {
    if (this.e < 0) return;
    this.seeExponent(decimalExponent(v));
  }

  /** Values known to have at most `e` decimal places (a block's decimal column); -1: not decimals. */
  seeExponent(e: number): void {
    if (this.e < 0) return;
    this.e = e < 0 ? -1 : Math.max(this.e, e);
  }

  tidy(sums: Float64Array): void {
    if (this.e < 0) return;
    const p = 10 ** this.e;
    for (let i = 0; i < sums.length; i++) {
      const m = Math.round(sums[i]! * p);
      if (Math.abs(m) < 2 ** 50) sums[i] = m / p;
    }
  }
}

/** One raw value into cell `k` (a cell's sum, min and max are NaN until its first value: emptyStats). */
function addToCell(s: CellStats, k: number, v: number): void {
  s.sum[k] = s.count[k] ? s.sum[k]! + v : v;
  s.count[k]! += 1;
  if (!(v >= s.min[k]!)) s.min[k] = v;
  if (!(v <= s.max[k]!)) s.max[k] = v;
}

function emptyStats(c: number): CellStats {
  return {
    sum: new Float64Array(c).fill(Number.NaN),
    count: new Float64Array(c),
    min: new Float64Array(c).fill(Number.NaN),
    max: new Float64Array(c).fill(Number.NaN),
  };
}

/** Adds rollups of the same width cell by cell (coarsen's step; the tests' reference for rollUpBlocks). */
export function mergeRollups(parts: Rollup[], width: number): Rollup {
  const starts = [...new Set(parts.flatMap((p) => [...p.cells]))].sort((a, b) => a - b);
  const index = new Map(starts.map((s, i) => [s, i]));
  const metrics = new Map<number, CellStats>();
  const digits = new Map<number, DecimalDigits>();
  for (const p of parts) {
    const at = Int32Array.from(p.cells, (s) => index.get(s)!);
    for (const [id, src] of p.metrics) {
      let s = metrics.get(id);
      if (!s) metrics.set(id, (s = emptyStats(starts.length)));
      let d = digits.get(id);
      if (!d) digits.set(id, (d = new DecimalDigits()));
      for (let i = 0; i < at.length; i++) {
        if (!src.count[i]) continue;
        d.see(src.sum[i]!);
        const k = at[i]!;
        s.sum[k] = s.count[k] ? s.sum[k]! + src.sum[i]! : src.sum[i]!;
        s.count[k]! += src.count[i]!;
        if (!(src.min[i]! >= s.min[k]!)) s.min[k] = src.min[i]!;
        if (!(src.max[i]! <= s.max[k]!)) s.max[k] = src.max[i]!;
      }
    }
  }
  for (const [id, d] of digits) d.tidy(metrics.get(id)!.sum);
  return { cells: Float64Array.from(starts), width, metrics };
}

/** Coarser cells (a multiple of the rollup's width) from finer ones. */
export function coarsen(r: Rollup, width: number): Rollup {
  const parts: Rollup = { cells: r.cells.map((s) => Math.floor(s / width) * width), width, metrics: r.metrics };
  return mergeRollups([parts], width);
}

export function encodeRollup(r: Rollup): Uint8Array {
  return encodeBlock(rollupBlock(r), FAST_QUALITY);
}

/** encodeRollup with the compression in libuv's thread pool. */
export function encodeRollupAsync(r: Rollup): Promise<Uint8Array> {
  return encodeBlockAsync(rollupBlock(r), FAST_QUALITY);
}

/** A rollup as block columns: four per metric (sum, count, min, max). */
function rollupBlock(r: Rollup): BlockData {
  const columns = new Map<number, Float64Array>();
  for (const [id, s] of r.metrics) {
    // Cells without a value of this metric are absent (NaN), so the count column needs no zeros.
    const count = s.count.map((x) => (x ? x : Number.NaN));
    // A sum past the float64 range both ways (+Infinity + -Infinity) is NaN, which the block would store as no sum
    // beside the cell's count: a mean of 0 once read. Stored as Infinity, it stays an overflowed sum (no mean, as
    // from raw values) through every later addition, whichever sign it meets.
    const overflowed = s.sum.some((x, k) => x !== x && s.count[k]! > 0);
    const sum = overflowed ? s.sum.map((x, k) => (x !== x && s.count[k]! > 0 ? Number.POSITIVE_INFINITY : x)) : s.sum;
    columns.set(id * ROLLUP_STATS + SUM, sum);
    columns.set(id * ROLLUP_STATS + COUNT, count);
    columns.set(id * ROLLUP_STATS + MIN, s.min);
    columns.set(id * ROLLUP_STATS + MAX, s.max);
  }
  return { ts: r.cells, columns };
}
