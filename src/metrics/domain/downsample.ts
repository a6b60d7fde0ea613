/**
 * Downsampling: averaging raw points into equal-width time buckets. Pure
 * functions over metric ids and values, shared by the host series and the
 * tenant aggregate.
 */

/** One stored report, as read back: metric ids (the tenant's dictionary) and their values. */
export interface SampleRow {
  ts: number;
  metricIds: ArrayLike<number>;
  values: ArrayLike<number>;
}

export interface BucketPlan {
  /** Start of the first bucket (the range's `from`). */
  from: number;
  /** Width of every bucket in ms; bucket i covers [from + i*width, from + (i+1)*width). */
  width: number;
  count: number;
}

/** Equal-width buckets covering the inclusive range [from, to] with at most `points` buckets, each at least `minWidth` ms. */
export function planBuckets(from: number, to: number, points: number, minWidth = 1): BucketPlan {
  const span = to - from + 1;
  const width = Math.max(minWidth, Math.ceil(span / points));
  return { from, width, count: Math.ceil(span / width) };
}

/**
 * Per bucket and metric: the sum and count of raw values. `means()` turns them
 * into the per-metric mean of each bucket (NaN where the bucket holds no value).
 */
export class BucketAccumulator {
  private readonly sums = new Map<number, Float64Array>();
  private readonly counts = new Map<number, Uint32Array>();
  private readonly mins = new Map<number, Float64Array>();
  private readonly maxs = new Map<number, Float64Array>();

  constructor(readonly plan: BucketPlan) {}

  add(row: SampleRow): void {
    const b = Math.floor((row.ts - this.plan.from) / this.plan.width);
    if (b < 0 || b >= this.plan.count) return;
    for (let i = 0; i < row.metricIds.length; i++) {
      const id = row.metricIds[i]!;
      let sums = this.sums.get(id);
      let counts = this.counts.get(id);
      if (!sums || !counts) {
        sums = new Float64Array(this.plan.count);
        counts = new Uint32Array(this.plan.count);
        this.sums.set(id, sums);
        this.counts.set(id, counts);
        this.mins.set(id, new Float64Array(this.plan.count).fill(Number.POSITIVE_INFINITY));
        this.maxs.set(id, new Float64Array(this.plan.count).fill(Number.NEGATIVE_INFINITY));
      }
      const v = row.values[i]!;
      sums[b]! += v;
      counts[b]! += 1;
      const mins = this.mins.get(id)!;
      const maxs = this.maxs.get(id)!;
      if (v < mins[b]!) mins[b] = v;
      if (v > maxs[b]!) maxs[b] = v;
    }
  }

  /** Smallest and largest raw value per metric per bucket; NaN for a bucket without a value. */
  extremes(): { min: Map<number, Float64Array>; max: Map<number, Float64Array> } {
    const clean = (m: Map<number, Float64Array>) => new Map([...m].map(([id, a]) => [id, a.map((v) => (Number.isFinite(v) ? v : Number.NaN))]));
    return { min: clean(this.mins), max: clean(this.maxs) };
  }

  /** Mean per metric per bucket; NaN for a bucket without a value of that metric. */
  means(): Map<number, Float64Array> {
    const out = new Map<number, Float64Array>();
    for (const [id, sums] of this.sums) {
      const counts = this.counts.get(id)!;
      out.set(id, sums.map((s, b) => (counts[b] ? tidy(s / counts[b]!) : Number.NaN)));
    }
    return out;
  }
}

/**
 * Averages hosts' bucket means per bucket, each host weighing the same
 * whatever its report rate. Hosts are added one at a time, so memory holds
 * one host's means plus the running totals, however many hosts there are.
 */
export class CrossHostAverager {
  private readonly sums = new Map<number, Float64Array>();
  private readonly counts = new Map<number, Uint32Array>();
  private readonly mins = new Map<number, Float64Array>();
  private readonly maxs = new Map<number, Float64Array>();

  constructor(readonly count: number) {}

  add(hostMeans: Map<number, Float64Array>): void {
    for (const [id, means] of hostMeans) {
      let s = this.sums.get(id);
      let c = this.counts.get(id);
      if (!s || !c) {
        s = new Float64Array(this.count);
        c = new Uint32Array(this.count);
        this.sums.set(id, s);
        this.counts.set(id, c);
      }
      for (let b = 0; b < this.count; b++) {
        if (!Number.isNaN(means[b]!)) { s[b]! += means[b]!; c[b]! += 1; }
      }
    }
  }

  /** Folds one host's bucket extremes into the fleet's: the smallest min and the largest max of any host. */
  addExtremes(ext: { min: Map<number, Float64Array>; max: Map<number, Float64Array> }): void {
    const fold = (into: Map<number, Float64Array>, from: Map<number, Float64Array>, pick: (a: number, b: number) => number) => {
      for (const [id, vals] of from) {
        const cur = into.get(id);
        if (!cur) { into.set(id, Float64Array.from(vals)); continue; }
        for (let b = 0; b < this.count; b++) {
          const v = vals[b]!;
          if (Number.isNaN(v)) continue;
          cur[b] = Number.isNaN(cur[b]!) ? v : pick(cur[b]!, v);
        }
      }
    };
    fold(this.mins, ext.min, Math.min);
    fold(this.maxs, ext.max, Math.max);
  }

  extremes(): { min: Map<number, Float64Array>; max: Map<number, Float64Array> } {
    return { min: this.mins, max: this.maxs };
  }

  /** Mean across hosts per metric per bucket; NaN where no host has a value. */
  means(): Map<number, Float64Array> {
    const out = new Map<number, Float64Array>();
    for (const [id, s] of this.sums) {
      const c = this.counts.get(id)!;
      out.set(id, s.map((v, b) => (c[b] ? tidy(v / c[b]!) : Number.NaN)));
    }
    return out;
  }
}

/** Column-oriented series: one timestamp per point, one value (or null) per metric per point. */
export interface Columns {
  timestamps: number[];
  metrics: Map<number, (number | null)[]>;
  /** Per metric, each point's smallest and largest raw value (when asked for). */
  min?: Map<number, (number | null)[]>;
  max?: Map<number, (number | null)[]>;
}

/** Drops buckets where no metric has a value; bucket timestamps are the bucket starts. */
export function bucketColumns(plan: BucketPlan, means: Map<number, Float64Array>, ext?: { min: Map<number, Float64Array>; max: Map<number, Float64Array> }): Columns {
  const keep: number[] = [];
  for (let b = 0; b < plan.count; b++) {
    for (const m of means.values()) if (!Number.isNaN(m[b]!)) { keep.push(b); break; }
  }
  const pick = (from: Map<number, Float64Array>) => {
    const out = new Map<number, (number | null)[]>();
    for (const [id, m] of from) out.set(id, keep.map((b) => (Number.isNaN(m[b]!) ? null : m[b]!)));
    return out;
  };
  const columns: Columns = { timestamps: keep.map((b) => plan.from + b * plan.width), metrics: pick(means) };
  if (ext) { columns.min = pick(ext.min); columns.max = pick(ext.max); }
  return columns;
}

/** Raw rows as columns, one point per report, null where a report lacks a metric. */
export function rawColumns(rows: SampleRow[], minmax = false): Columns {
  const metrics = new Map<number, (number | null)[]>();
  rows.forEach((row, r) => {
    for (let i = 0; i < row.metricIds.length; i++) {
      const id = row.metricIds[i]!;
      let col = metrics.get(id);
      if (!col) {
        col = new Array<number | null>(rows.length).fill(null);
        metrics.set(id, col);
      }
      col[r] = row.values[i]!;
    }
  });
  const columns: Columns = { timestamps: rows.map((r) => r.ts), metrics };
  // A raw point is its own smallest and largest value.
  if (minmax) { columns.min = metrics; columns.max = metrics; }
  return columns;
}

/** Rounds away summation noise (the mean of 0.4 and 0.4 is 0.4, not 0.4000000000000001); 15 digits is float64's exact decimal precision. */
function tidy(x: number): number {
  return Number(x.toPrecision(15));
}
