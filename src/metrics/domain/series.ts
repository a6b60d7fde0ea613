import { AppError } from '../../core/errors.js';
import { BucketAccumulator, CrossHostAverager, bucketColumns, planBuckets, rawColumns, type Columns, type SampleRow } from './downsample.js';
import type { MetricsStore } from './metrics-store.js';

export interface SeriesSettings {
  /** Point budget when the request does not name one. */
  defaultPoints: number;
  /** Largest budget a request may ask for. */
  maxPoints: number;
}

/** Range when the request gives neither bound: the last hour, as Prometheus' and Grafana's default view. */
export const DEFAULT_RANGE_MS = 3_600_000;
/**
 * Narrowest aggregate bucket: the agents' reporting interval. Hosts report at
 * different instants within each interval, so narrower buckets would average
 * a different subset of hosts in each and make the fleet line jump.
 */
export const AGGREGATE_MIN_BUCKET_MS = 10_000;

export interface SeriesQuery {
  from?: number | undefined;
  to?: number | undefined;
  points?: number | undefined;
  /** Also return each point's min and max (see Series.min). */
  minmax?: boolean | undefined;
}

export interface SeriesRange {
  from: number;
  to: number;
  points: number;
  minmax: boolean;
}

export interface Series {
  /** The inclusive range served, after defaults. */
  from: number;
  to: number;
  /** The point budget applied. */
  points: number;
  /** Bucket width in ms when the points were averaged into buckets; null for raw reports. */
  bucketMs: number | null;
  /** Point times: report times, or bucket starts. */
  timestamps: number[];
  /** Metric name -> one value per timestamp (null: no value of that metric at that point). */
  metrics: Record<string, (number | null)[]>;
  /** With `minmax`: per metric, each point's smallest raw value (of any host, for the aggregate). */
  min?: Record<string, (number | null)[]>;
  /** With `minmax`: per metric, each point's largest raw value. */
  max?: Record<string, (number | null)[]>;
}

export interface HostSeries extends Series {
  hostId: string;
}

export interface AggregateSeries extends Series {
  /** Hosts with at least one report in the range. */
  hosts: number;
}

/**
 * Applies the defaults: `to` = now, `from` = `to` - 1 hour, `points` = the
 * configured budget. `from > to` and a budget above the cap are 400s.
 */
export function resolveRange(q: SeriesQuery, settings: SeriesSettings, now: number): SeriesRange {
  const to = q.to ?? (q.from !== undefined ? Math.max(now, q.from) : now);
  const from = q.from ?? Math.max(0, to - DEFAULT_RANGE_MS);
  if (from > to) throw new AppError('invalid_request', `querystring from: ${from} is after to (${to})`);
  const points = q.points ?? settings.defaultPoints;
  if (points > settings.maxPoints) throw new AppError('invalid_request', `querystring points: ${points} is above the maximum of ${settings.maxPoints}`);
  return { from, to, points, minmax: q.minmax ?? false };
}

/**
 * One host's series. Up to `points` reports come back as they are; past
 * that, reports are averaged per metric into `points` equal-width buckets.
 * `not_found` for a host the tenant does not have, whoever else has it.
 */
export async function readHostSeries(store: MetricsStore, tenantId: string, hostId: string, range: SeriesRange): Promise<HostSeries> {
  if (!(await store.hostExists(tenantId, hostId))) throw new AppError('not_found', `no host ${hostId}`);
  const raw: SampleRow[] = [];
  let buckets: BucketAccumulator | undefined;
  for await (const page of store.scanReports(tenantId, hostId, range.from, range.to)) {
    for (const row of page) {
      if (buckets) { buckets.add(row); continue; }
      raw.push(row);
      if (raw.length > range.points) {
        buckets = new BucketAccumulator(planBuckets(range.from, range.to, range.points));
        for (const r of raw) buckets.add(r);
        raw.length = 0;
      }
    }
  }
  const columns = buckets
    ? bucketColumns(buckets.plan, buckets.means(), range.minmax ? buckets.extremes() : undefined)
    : rawColumns(raw, range.minmax);
  return { hostId, ...range, bucketMs: buckets ? buckets.plan.width : null, ...(await named(store, tenantId, columns)) };
}

/**
 * The tenant's fleet average: every host's reports are averaged per bucket
 * first, then the host means are averaged, so a host that reports twice as
 * often does not count twice. Buckets are at least AGGREGATE_MIN_BUCKET_MS wide.
 */
export async function readAggregate(store: MetricsStore, tenantId: string, range: SeriesRange): Promise<AggregateSeries> {
  const plan = planBuckets(range.from, range.to, range.points, AGGREGATE_MIN_BUCKET_MS);
  const fleet = new CrossHostAverager(plan.count);
  let hosts = 0;
  for (const hostId of await store.listHosts(tenantId)) {
    const buckets = new BucketAccumulator(plan);
    let any = false;
    for await (const page of store.scanReports(tenantId, hostId, range.from, range.to)) {
      for (const row of page) buckets.add(row);
      any ||= page.length > 0;
    }
    if (!any) continue;
    hosts += 1;
    fleet.add(buckets.means());
    if (range.minmax) fleet.addExtremes(buckets.extremes());
  }
  const columns = bucketColumns(plan, fleet.means(), range.minmax ? fleet.extremes() : undefined);
  return { ...range, bucketMs: plan.width, hosts, ...(await named(store, tenantId, columns)) };
}

const byName = new Intl.Collator('en', { numeric: true }).compare;

/** Swaps metric ids for names, ordered naturally (cpu.perCore.2 before cpu.perCore.10). */
async function named(store: MetricsStore, tenantId: string, columns: Columns): Promise<Pick<Series, 'timestamps' | 'metrics' | 'min' | 'max'>> {
  const names = await store.metricNames(tenantId, columns.metrics.keys());
  const byNames = (m: Map<number, (number | null)[]>) => {
    const entries = [...m].map(([id, values]) => [names.get(id)!, values] as const).filter(([n]) => n !== undefined);
    entries.sort((a, b) => byName(a[0], b[0]));
    return Object.fromEntries(entries);
  };
  const out: Pick<Series, 'timestamps' | 'metrics' | 'min' | 'max'> = { timestamps: columns.timestamps, metrics: byNames(columns.metrics) };
  if (columns.min && columns.max) { out.min = byNames(columns.min); out.max = byNames(columns.max); }
  return out;
}
