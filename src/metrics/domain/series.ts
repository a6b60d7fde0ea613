import { AppError } from '../../core/errors.js';
import type { MetricsStore, SeriesColumns, StoredSeries } from './metrics-store.js';

export interface SeriesSettings {
  /** Point budget when the request does not name one. */
  defaultPoints: number;
  /** Largest budget a request may ask for. */
  maxPoints: number;
}

/** Range when the request gives neither bound: the last hour, as Prometheus' and Grafana's default view. */
export const DEFAULT_RANGE_MS = 3_600_000;

export interface SeriesQuery {
  from?: number | undefined;
  to?: number | undefined;
  points?: number | undefined;
  /** Also return each point's min and max (see Series.min). */
  minmax?: boolean | undefined;
  /** Only these metrics (exact names), e.g. the ones one chart draws. */
  metrics?: readonly string[] | undefined;
}

export interface SeriesRange {
  from: number;
  to: number;
  points: number;
  minmax: boolean;
  /** Only these metrics; undefined: every metric. */
  metrics?: readonly string[] | undefined;
}

export interface Series {
  /** The inclusive range served, after defaults. */
  from: number;
  to: number;
  /** The point budget applied. */
  points: number;
  /** Bucket width in ms when the points were averaged into buckets; null for raw reports. */
  bucketMs: number | null;
  /** Point times: report times, or bucket starts (epoch multiples of bucketMs). */
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
  return { from, to, points, minmax: q.minmax ?? false, ...(q.metrics ? { metrics: q.metrics } : {}) };
}

/**
 * One host's series: raw reports when at most `points` fall in the range,
 * otherwise per-metric means over aligned buckets (the storage engine picks
 * raw blocks or a rollup tier). `not_found` for a host the tenant does not
 * have, whoever else has it.
 */
export async function readHostSeries(store: MetricsStore, tenantId: string, hostId: string, range: SeriesRange): Promise<HostSeries> {
  const stored = await store.readHostSeries(tenantId, hostId, range);
  if (!stored) throw new AppError('not_found', `no host ${hostId}`);
  return { hostId, ...served(range), bucketMs: stored.bucketMs, ...(await named(store, tenantId, stored, range.metrics)) };
}

/**
 * The tenant's fleet average: per aligned bucket (at least 10 s, the agents'
 * interval) and metric, the mean of every sample of every host in it.
 */
export async function readAggregate(store: MetricsStore, tenantId: string, range: SeriesRange): Promise<AggregateSeries> {
  const stored = await store.readAggregate(tenantId, range);
  return { ...served(range), bucketMs: stored.bucketMs, hosts: stored.hosts, ...(await named(store, tenantId, stored, range.metrics)) };
}

/** The range fields an answer carries (the routes serialize answers as they are, so nothing else may ride along). */
function served(range: SeriesRange): Pick<Series, 'from' | 'to' | 'points'> {
  return { from: range.from, to: range.to, points: range.points };
}

const byName = new Intl.Collator('en', { numeric: true }).compare;

/**
 * Swaps metric ids for names, ordered naturally (cpu.perCore.2 before
 * cpu.perCore.10). With `only`, just those metrics, and just the points where
 * one of them has a value.
 */
async function named(store: MetricsStore, tenantId: string, columns: SeriesColumns | StoredSeries, only?: readonly string[]): Promise<Pick<Series, 'timestamps' | 'metrics' | 'min' | 'max'>> {
  const names = await store.metricNames(tenantId, columns.metrics.keys());
  const wanted = only ? new Set(only) : undefined;
  const ids = [...columns.metrics.keys()].filter((id) => { const n = names.get(id); return n !== undefined && (!wanted || wanted.has(n)); });
  ids.sort((a, b) => byName(names.get(a)!, names.get(b)!));
  // A filter keeps the points where a kept metric has a value: the others would be all null.
  const points = wanted ? columns.timestamps.flatMap((_, i) => (ids.some((id) => columns.metrics.get(id)![i] !== null) ? [i] : [])) : undefined;
  const pick = (values: (number | null)[]) => (points && points.length !== values.length ? points.map((i) => values[i]!) : values);
  const byNames = (m: Map<number, (number | null)[]>) => Object.fromEntries(ids.map((id) => [names.get(id)!, pick(m.get(id)!)]));
  const out: Pick<Series, 'timestamps' | 'metrics' | 'min' | 'max'> = { timestamps: points ? points.map((i) => columns.timestamps[i]!) : columns.timestamps, metrics: byNames(columns.metrics) };
  if (columns.min && columns.max) { out.min = byNames(columns.min); out.max = byNames(columns.max); }
  return out;
}
