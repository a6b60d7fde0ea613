import { AppError, isAppError } from '../../core/errors.js';
import type { HostLatest, MetricsStore } from './metrics-store.js';
import { readHostSeries, type SeriesRange } from './series.js';

/**
 * Per-host reads over a range for the dashboard: the hosts ranked by one
 * metric's mean ("top 10 by CPU"), and one metric's small series per host
 * (the host list's sparklines). Built on readHostSeries as it stands, one
 * host at a time; a faster path can replace the loop without changing the contract.
 */

/** `disk` ranks by the fullest filesystem: the largest mean of any `disk.<path>.percent`. */
export const FULLEST_DISK = 'disk';

export interface RankedHost {
  hostId: string;
  hostname: string;
  /** The metric's mean over the range (for `disk`: the fullest filesystem's mean). */
  value: number;
  /** For `disk`: which filesystem. */
  metric: string;
}

const DISK_PERCENT = /^disk\..+\.percent$/;

/** The value of `metric` in a one-point series' columns, or undefined when the host had none in range. */
function pick(metrics: Record<string, (number | null)[]>, metric: string): { value: number; metric: string } | undefined {
  if (metric !== FULLEST_DISK) {
    const v = Object.hasOwn(metrics, metric) ? metrics[metric]![0] : undefined;
    return v === null || v === undefined ? undefined : { value: v, metric };
  }
  let best: { value: number; metric: string } | undefined;
  for (const [name, values] of Object.entries(metrics)) {
    const v = values[0];
    if (DISK_PERCENT.test(name) && v !== null && v !== undefined && (!best || v > best.value)) best = { value: v, metric: name };
  }
  return best;
}

/**
 * The `limit` hosts with the highest mean of `metric` over [from, to],
 * highest first (ties by host id); hosts without that metric in the range are left out.
 */
export async function readTopHosts(store: MetricsStore, tenantId: string, metric: string, range: Pick<SeriesRange, 'from' | 'to'>, limit: number): Promise<RankedHost[]> {
  return (await readTopHostsBy(store, tenantId, [metric], range, limit)).ranked.get(metric)!;
}

export interface TopHostsOptions {
  /** The tenant's host list, when the caller has it already. */
  latest?: HostLatest[] | undefined;
  /** Stops the pass between two hosts (rejecting with the signal's reason): the one who asked has left. */
  signal?: AbortSignal | undefined;
}

/**
 * readTopHosts for several metrics at once, reading each host's range once
 * (the fleet page's three lists), with how many hosts reported in the range.
 */
export async function readTopHostsBy(store: MetricsStore, tenantId: string, metrics: string[], range: Pick<SeriesRange, 'from' | 'to'>, limit: number, opts: TopHostsOptions = {}): Promise<{ ranked: Map<string, RankedHost[]>; hosts: number }> {
  if (range.from > range.to) throw new AppError('invalid_request', `querystring from: ${range.from} is after to (${range.to})`);
  const ranked = new Map(metrics.map((m) => [m, [] as RankedHost[]]));
  let hosts = 0;
  for (const host of opts.latest ?? await store.latestByHost(tenantId)) {
    await otherRequestsFirst();
    opts.signal?.throwIfAborted();
    const series = await hostSeriesOrNone(store, tenantId, host.hostId, { ...range, points: 1, minmax: false });
    if (!series?.timestamps.length) continue;
    hosts += 1;
    for (const [metric, list] of ranked) {
      const found = pick(series.metrics, metric);
      if (found) list.push({ hostId: host.hostId, hostname: host.hostname, ...found });
    }
  }
  for (const list of ranked.values()) {
    list.sort((a, b) => b.value - a.value || (a.hostId < b.hostId ? -1 : 1));
    list.splice(limit);
  }
  return { ranked, hosts };
}

/**
 * Lets the event loop serve what is waiting (a chart's request) between two
 * hosts: each host's read runs to its end without yielding on SQLite, and a
 * pass over a large fleet's month takes seconds.
 */
function otherRequestsFirst(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A host removed by retention between the listing and its read is skipped, not a failed request. */
async function hostSeriesOrNone(store: MetricsStore, tenantId: string, hostId: string, range: SeriesRange) {
  try {
    return await readHostSeries(store, tenantId, hostId, range);
  } catch (e: unknown) {
    if (isAppError(e) && e.code === 'not_found') return undefined;
    throw e;
  }
}

export interface HostSpark {
  hostId: string;
  timestamps: number[];
  values: (number | null)[];
}

/** One metric's series of every host of the tenant, at most `points` points each (the host list's sparklines). */
export async function readHostSparks(store: MetricsStore, tenantId: string, metric: string, range: SeriesRange): Promise<HostSpark[]> {
  const out: HostSpark[] = [];
  for (const hostId of await store.listHosts(tenantId)) {
    await otherRequestsFirst();
    const series = await hostSeriesOrNone(store, tenantId, hostId, { ...range, minmax: false });
    if (!series) continue;
    // Own names only: `metric` comes from the query string, and `__proto__` or `constructor` must read as a metric the host lacks.
    const values = Object.hasOwn(series.metrics, metric) ? series.metrics[metric]! : series.timestamps.map(() => null);
    out.push({ hostId, timestamps: series.timestamps, values });
  }
  return out;
}
