/**
 * The engine's fixed time grid. A host's reports are sealed per window; the
 * rollup tiers are cells that divide a window evenly, so a bucket made of
 * whole cells never straddles two blocks' rollups.
 */

/** One sealed block per host per window (1 h: 360 reports at a 10 s interval). */
export const WINDOW_MS = 3_600_000;
/**
 * A host's rollup cell, kept inside its block row: one cell per window, a few
 * percent of the block. Finer host cells would cost more disk than they save:
 * ranges too short for hourly buckets decode raw blocks quickly enough.
 */
export const HOST_TIER_MS = 3_600_000;
/** A tenant's fine and coarse rollup cells (the aggregate's tiers). */
export const TENANT_FINE_MS = 60_000;
export const TENANT_COARSE_MS = 3_600_000;

export function windowOf(ts: number): number {
  return Math.floor(ts / WINDOW_MS) * WINDOW_MS;
}

/**
 * The aggregate's bucket widths are multiples of this, the agent's default interval: every host at that interval
 * (or at one dividing it) puts the same number of samples in each bucket, so each weighs the same in the mean.
 */
export const AGGREGATE_UNIT_MS = 10_000;
