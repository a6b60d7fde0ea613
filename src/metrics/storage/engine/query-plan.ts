/**
 * Query planning: the bucket grid of a downsampled answer and the tier it is
 * read from. Buckets are aligned to epoch multiples of their width (as
 * Prometheus and VictoriaMetrics align steps), so a chart refreshed a moment
 * later keeps its buckets, and a bucket is made of whole rollup cells. A
 * bucket holds only the samples of [from, to]: the edge buckets' spans past
 * the range are left out (the reader folds a window the range only partly
 * covers from its samples, not from its rollup). The coarsest tier that is no
 * coarser than the requested resolution is used. Widths are multiples of
 * `unit` (the aggregate's is the agent's 10 s interval: every host reporting
 * at it puts as many samples in each bucket as every other, so each weighs
 * the same in the bucket's mean; windows.ts).
 */
export interface Grid {
  /** Start of the first bucket (a multiple of width, at or before `from`). */
  start: number;
  width: number;
  count: number;
  /** Cell width of the tier the buckets are read from; null: raw samples. */
  tier: number | null;
  /** The range asked for: samples outside it are not folded. */
  from: number;
  to: number;
}

export function planGrid(from: number, to: number, points: number, opts: { unit: number; tiers: readonly number[] }): Grid {
  let width = Math.ceil((to - from + 1) / points);
  for (;;) {
    width = Math.ceil(width / opts.unit) * opts.unit;
    let tier: number | null = null;
    for (const t of opts.tiers) if (t <= width && (tier === null || t > tier)) tier = t;
    // Tiers are multiples of the unit, so a whole number of cells is a whole number of units too.
    const step = tier ?? opts.unit;
    width = Math.ceil(width / step) * step;
    const first = Math.floor(from / width);
    const count = Math.floor(to / width) - first + 1;
    // Alignment can add one bucket past the budget: widen by one step until it fits.
    if (count <= points) return { start: first * width, width, count, tier, from, to };
    width += step;
  }
}

/** The end (exclusive) of the span a grid covers. */
export function gridEnd(g: Grid): number {
  return g.start + g.count * g.width;
}

/**
 * The buckets of `g` that time [from, end) can fall in, as a grid of its own
 * and its first bucket's index in `g`: a part of a query folded apart from
 * the rest (in a fold worker) and merged back bucket for bucket.
 */
export function subgrid(g: Grid, from: number, end: number): { grid: Grid; first: number } {
  const first = Math.max(0, Math.floor((from - g.start) / g.width));
  const last = Math.max(first, Math.min(g.count, Math.ceil((end - g.start) / g.width)));
  return { grid: { ...g, start: g.start + first * g.width, count: last - first }, first };
}
