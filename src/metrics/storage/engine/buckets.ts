import type { SeriesColumns } from '../../domain/metrics-store.js';
import { divisorOf, visitBlock } from './block-codec.js';
import { gridEnd, type Grid } from './query-plan.js';
import { COUNT, MIN, ROLLUP_STATS, SUM } from './rollup.js';

interface Runs {
  /** Row index where each run starts, and one past the last row at the end. */
  starts: number[];
  /** Each run's bucket, -1 outside the grid. */
  buckets: number[];
  rowBucket: Int32Array;
}

/**
 * Bytes per slab of accumulators. An ArrayBuffer is allocated outside V8's heap and costs microseconds: four per
 * metric were half a millisecond of a one-host query (28 metrics, on each thread that folds a part of it). Slabs stay
 * under glibc's 128 KiB mmap threshold: slabs of 512 KiB doubled the query's p95 in the same runs.
 */
const SLAB_BYTES = 96 * 1024;

interface Acc {
  sum: Float64Array;
  count: Float64Array;
  min: Float64Array;
  max: Float64Array;
}

/** Buckets folded elsewhere (a fold worker): per metric id, its accumulators over buckets `first`.. of the grid. */
export interface PartialBuckets {
  first: number;
  metrics: Array<[id: number, acc: Acc]>;
}

/**
 * Per bucket and metric: sum, count, min and max, fed from raw blocks, head
 * rows or rollup cells alike. Whatever the source, a bucket's mean is its
 * sum over its count, so mixing tiers with raw rows stays exact.
 */
export class Buckets {
  private readonly acc = new Map<number, Acc>();
  private readonly end: number;
  /** The samples folded: those of the asked range inside this grid (a fold thread's grid is a part of the query's). */
  private readonly lo: number;
  private readonly hi: number;
  /** Accumulators are views into slabs of several metrics each: a metric costs no allocation of its own. */
  private readonly slabs: Float64Array[] = [];
  private slabUsed = 0;

  constructor(readonly grid: Grid) {
    this.end = gridEnd(grid);
    this.lo = Math.max(grid.start, grid.from);
    this.hi = Math.min(this.end - 1, grid.to);
  }

  private of(id: number): Acc {
    let a = this.acc.get(id);
    if (!a) {
      const n = this.grid.count;
      if (this.slabUsed + 4 * n > (this.slabs.at(-1)?.length ?? 0)) {
        this.slabs.push(new Float64Array(4 * n * Math.max(1, Math.floor(SLAB_BYTES / (32 * n)))));
        this.slabUsed = 0;
      }
      const slab = this.slabs.at(-1)!;
      const at = (k: number) => slab.subarray(this.slabUsed + k * n, this.slabUsed + (k + 1) * n);
      a = { sum: at(0), count: at(1), min: at(2).fill(Infinity), max: at(3).fill(-Infinity) };
      this.slabUsed += 4 * n;
      this.acc.set(id, a);
    }
    return a;
  }

  /** The memory behind every accumulator, to transfer (not copy) them to another thread. */
  buffers(): ArrayBuffer[] {
    return this.slabs.map((s) => s.buffer as ArrayBuffer);
  }

  /**
   * A sealed block's bytes, decoded and folded column by column (visitBlock):
   * no column array is kept, and none is allocated per block. Whether one of
   * its reports is in the range folded (a block only spanning it may hold none).
   */
  addBlock(bytes: Uint8Array): boolean {
    let runs: Runs | undefined;
    visitBlock(bytes, (ts) => { runs = this.runsOf(ts); }, (id, values, exponent, rows) => {
      if (rows) this.foldSparse(id, runs!, values, divisorOf(exponent), rows);
      else this.fold(id, runs!, values, divisorOf(exponent));
    });
    return runs !== undefined && runs.buckets.some((b) => b >= 0);
  }

  /** Rows are in time order, so a bucket is a run of rows: found once per block, then used for every column. */
  private runsOf(ts: Float64Array): Runs {
    const { start, width } = this.grid;
    const { lo, hi } = this;
    const starts: number[] = [];
    const buckets: number[] = [];
    const rowBucket = new Int32Array(ts.length);
    let prev = -1;
    for (let i = 0; i < ts.length; i++) {
      const t = ts[i]!;
      const b = t < lo || t > hi ? -1 : Math.floor((t - start) / width);
      rowBucket[i] = b;
      if (b !== prev || i === 0) { starts.push(i); buckets.push(b); prev = b; }
    }
    starts.push(ts.length);
    return { starts, buckets, rowBucket };
  }

  /** A complete column: each run folded into locals, the bucket written once (not four array updates per sample). */
  private fold(id: number, runs: Runs, values: Float64Array, divisor: number): void {
    const a = this.of(id);
    const { starts, buckets } = runs;
    for (let r = 0; r < buckets.length; r++) {
      const b = buckets[r]!;
      if (b < 0) continue;
      let sum = 0;
      let count = 0;
      let min = Infinity;
      let max = -Infinity;
      for (let i = starts[r]!, end = starts[r + 1]!; i < end; i++) {
        const v = values[i]! / divisor;
        if (v !== v) continue;
        sum += v;
        count++;
        if (v < min) min = v;
        if (v > max) max = v;
      }
      if (!count) continue;
      a.sum[b]! += sum;
      a.count[b]! += count;
      if (min < a.min[b]!) a.min[b] = min;
      if (max > a.max[b]!) a.max[b] = max;
    }
  }

  /** A column with values on some rows only (a metric that came or went within the block). */
  private foldSparse(id: number, runs: Runs, values: Float64Array, divisor: number, rows: number[]): void {
    const a = this.of(id);
    for (let i = 0; i < rows.length; i++) {
      const b = runs.rowBucket[rows[i]!]!;
      const v = values[i]! / divisor;
      if (b < 0 || v !== v) continue;
      a.sum[b]! += v;
      a.count[b]! += 1;
      if (v < a.min[b]!) a.min[b] = v;
      if (v > a.max[b]!) a.max[b] = v;
    }
  }

  /** What was folded here, for merging into the Buckets of the whole grid; `first` is this grid's offset in it. */
  partial(first: number): PartialBuckets {
    return { first, metrics: [...this.acc] };
  }

  /** Adds buckets folded elsewhere over a part of this grid (see `subgrid`). */
  merge(p: PartialBuckets): void {
    for (const [id, part] of p.metrics) {
      const a = this.of(id);
      for (let i = 0, b = p.first; i < part.count.length; i++, b++) {
        if (!part.count[i]) continue;
        a.sum[b]! += part.sum[i]!;
        a.count[b]! += part.count[i]!;
        if (part.min[i]! < a.min[b]!) a.min[b] = part.min[i]!;
        if (part.max[i]! > a.max[b]!) a.max[b] = part.max[i]!;
      }
    }
  }

  addRow(ts: number, ids: ArrayLike<number>, values: ArrayLike<number>): void {
    if (ts < this.lo || ts > this.hi) return;
    const b = Math.floor((ts - this.grid.start) / this.grid.width);
    for (let i = 0; i < ids.length; i++) {
      const a = this.of(ids[i]!);
      const v = values[i]!;
      a.sum[b]! += v;
      a.count[b]! += 1;
      if (v < a.min[b]!) a.min[b] = v;
      if (v > a.max[b]!) a.max[b] = v;
    }
  }

  /**
   * An encoded rollup (rollup.ts: column `id * 4 + stat`), decoded column by
   * column like a block (visitBlock) and added cell by cell: the grid's width
   * is a multiple of the cell width, so each cell lands in one bucket. No
   * array is allocated per metric or statistic, which on a tenant's day of
   * minute cells was most of the query's garbage. Only rollups of windows
   * inside [from, to] come here: a cell cannot be cut at the range's edge.
   */
  addRollup(bytes: Uint8Array): void {
    const { start, width } = this.grid;
    let at = new Int32Array(0);
    visitBlock(bytes, (cells) => {
      at = Int32Array.from(cells, (t) => (t < start || t >= this.end ? -1 : Math.floor((t - start) / width)));
    }, (column, values, exponent, rows) => {
      const divisor = divisorOf(exponent);
      const a = this.of(Math.floor(column / ROLLUP_STATS));
      const stat = column % ROLLUP_STATS;
      const target = stat === SUM ? a.sum : stat === COUNT ? a.count : stat === MIN ? a.min : a.max;
      for (let i = 0; i < values.length; i++) {
        const b = at[rows ? rows[i]! : i]!;
        const v = values[i]! / divisor;
        // A cell without a value of the metric holds NaN (or nothing) in every statistic.
        if (b < 0 || v !== v) continue;
        if (stat === SUM || stat === COUNT) target[b]! += v;
        else if (stat === MIN ? v < target[b]! : v > target[b]!) target[b] = v;
      }
    });
  }

  /**
   * Bucket starts (`from` for a first bucket that starts before it: it holds nothing earlier) and per-metric means
   * (null where a bucket has no value of the metric); empty buckets are left out.
   */
  columns(minmax: boolean): SeriesColumns {
    const keep: number[] = [];
    for (let b = 0; b < this.grid.count; b++) {
      for (const a of this.acc.values()) if (a.count[b]) { keep.push(b); break; }
    }
    // A metric seen only outside the grid (a block or cell that overlaps the range's edge) is not part of the answer.
    const present = [...this.acc].filter(([, a]) => a.count.some((c) => c > 0));
    const pick = (f: (a: Acc, b: number) => number) => {
      const out = new Map<number, (number | null)[]>();
      for (const [id, a] of present) out.set(id, keep.map((b) => (a.count[b] ? f(a, b) : null)));
      return out;
    };
    const out: SeriesColumns = { timestamps: keep.map((b) => Math.max(this.grid.from, this.grid.start + b * this.grid.width)), metrics: pick((a, b) => tidyWithin(a.sum[b]! / a.count[b]!, a.min[b]!, a.max[b]!)) };
    if (minmax) {
      out.min = pick((a, b) => a.min[b]!);
      out.max = pick((a, b) => a.max[b]!);
    }
    return out;
  }
}

/**
 * A bucket's mean, tidied only where that keeps it inside the bucket's values: 15 digits are fewer than a large
 * counter carries (2345678901234567 would read back as 2345678901234570, above the bucket's maximum), and there the
 * exact quotient is the answer.
 */
export function tidyWithin(mean: number, min: number, max: number): number {
  const t = tidy(mean);
  return t >= min && t <= max ? t : mean;
}

const POW10 = Array.from({ length: 632 }, (_, i) => 10 ** (i - 323));

/**
 * Rounds away summation noise (the mean of 0.4 and 0.4 is 0.4, not
 * 0.4000000000000001) to 15 significant digits, float64's exact decimal
 * precision; arithmetic rather than toPrecision, which was a fifth of a query.
 */
function tidy(x: number): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  const scale = POW10[14 - Math.floor(Math.log10(Math.abs(x))) + 323];
  if (scale === undefined || !Number.isFinite(scale) || scale === 0) return x;
  const r = Math.round(x * scale) / scale;
  return Number.isFinite(r) ? r : x;
}
