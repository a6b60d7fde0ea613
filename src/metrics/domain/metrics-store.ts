import type { ReportMetrics } from './report-shapes.js';

/**
 * Storage of the metrics service, in domain terms. Implemented over SQLite
 * and PostgreSQL by storage/engine-metrics-store.ts (the storage engine in
 * storage/engine/); every contract below is checked by
 * test/metrics/store.test.ts on both.
 */
export interface MetricsStore {
  /** Creates a tenant; `conflict` when the name is taken. */
  createTenant(tenant: Tenant): Promise<void>;
  findTenantByName(name: string): Promise<Tenant | undefined>;
  insertToken(token: { id: string; tenantId: string; tokenHash: string; createdAt: number }): Promise<void>;
  /** The tenant of a token hash that exists and is not revoked. */
  findActiveToken(tokenHash: string): Promise<{ tokenId: string; tenantId: string; tenantName: string } | undefined>;
  /** Every token, oldest first, without hashes. */
  listTokens(): Promise<TokenInfo[]>;
  /** Marks a token revoked; false when no such token or it already was. */
  revokeToken(id: string, at: number): Promise<boolean>;

  /**
   * Stores one report. Concurrent calls are committed together in one
   * transaction (group commit); the promise settles only after that commit,
   * so a resolved `stored` is durable. Same (tenant, host, ts) again resolves
   * `duplicate` and changes nothing. A report that would take its host past
   * `limits.perHost` or its tenant past `limits.perTenant` distinct metric
   * names, or whose host is new and would take its tenant past
   * `limits.hostsPerTenant` hosts, resolves `limit_exceeded` and stores
   * nothing; the others in the same batch are unaffected. Concurrent appends,
   * on one store or several over one database, never pass a limit together. When `signal` aborts (the client went away)
   * while the report still waits for its commit, it is withdrawn: nothing is
   * stored and the promise rejects; once its commit has begun, it completes.
   */
  appendReport(report: NewReport, signal?: AbortSignal): Promise<AppendOutcome>;
  /**
   * Stores several reports with one durable commit (bulk ingest): one outcome
   * per report, in order, each with appendReport's meaning. A report that
   * fails alone (a limit) never fails the others. `signal` withdraws all of
   * them as in appendReport. They are taken as a backlog being replayed:
   * while such reports come faster than 1,000 a second, sealing the head
   * waits (at most 2 minutes), so the backlog drains sooner. `reports` is
   * read once, during the call: a caller may prepare each report as it is
   * read, so a body's reports need not all exist at once.
   */
  appendReports(reports: Iterable<NewReport>, signal?: AbortSignal): Promise<AppendOutcome[]>;
  /** Host ids of a tenant, sorted. */
  listHosts(tenantId: string): Promise<string[]>;
  hostExists(tenantId: string, hostId: string): Promise<boolean>;
  /**
   * A host's series over [from, to]: every report as it is when at most
   * `points` fall in the range, otherwise per-metric means over at most
   * `points` buckets aligned to epoch multiples of their width (each bucket
   * covering its whole span). Undefined when the tenant has no such host.
   */
  readHostSeries(tenantId: string, hostId: string, q: SeriesRequest): Promise<StoredSeries | undefined>;
  /**
   * The tenant's average over [from, to] in at most `points` aligned buckets
   * of at least 10 s: per bucket and metric, the mean of every sample of every
   * host in it. `limit_exceeded` when metrics x buckets would pass the bound
   * of one answer.
   */
  readAggregate(tenantId: string, q: SeriesRequest): Promise<StoredSeries & { hosts: number }>;
  /** The most points a readAggregate of every metric of the tenant may ask for without `limit_exceeded`. */
  aggregatePointsLimit(tenantId: string): Promise<number>;
  /** Seals every closed window and rolls up every tenant window now (the service does it on its own in the background). */
  flush(): Promise<void>;
  /** Names of the given metric ids of a tenant (ids of other tenants are absent from the result). */
  metricNames(tenantId: string, ids: Iterable<number>): Promise<Map<number, string>>;
  /**
   * One row per host of the tenant with its latest report's headline numbers,
   * sorted by hostname then host id; with `hostId`, that host's row alone
   * (none when the tenant has no such host).
   */
  latestByHost(tenantId: string, hostId?: string): Promise<HostLatest[]>;
  /** Deletes reports with ts < cutoff, and hosts whose latest report is older than cutoff. */
  deleteBefore(cutoff: number): Promise<{ reports: number; hosts: number }>;
  /** Waits for queued reports to commit; later appends are refused. */
  close(): Promise<void>;
}

export interface SeriesRequest {
  from: number;
  to: number;
  points: number;
  /** Also return each point's min and max. */
  minmax: boolean;
}

/** Column-oriented series keyed by metric id: one timestamp per point, one value (or null) per metric per point. */
export interface SeriesColumns {
  timestamps: number[];
  metrics: Map<number, (number | null)[]>;
  /** With minmax: per metric, each point's smallest raw value. */
  min?: Map<number, (number | null)[]>;
  max?: Map<number, (number | null)[]>;
}

export interface StoredSeries extends SeriesColumns {
  /** Bucket width in ms; null when every point is one report. */
  bucketMs: number | null;
}

export interface Tenant {
  id: string;
  name: string;
  createdAt: number;
}

export interface TokenInfo {
  id: string;
  tenantId: string;
  tenantName: string;
  createdAt: number;
  revokedAt: number | null;
}

export interface NewReport {
  tenantId: string;
  hostId: string;
  hostname: string;
  platform: string;
  ts: number;
  /** Metric names and values, in the report's order. */
  metrics: ReportMetrics;
}

export type AppendOutcome =
  | { status: 'stored' }
  | { status: 'duplicate' }
  | { status: 'limit_exceeded'; details: string };

export interface HostLatest {
  hostId: string;
  hostname: string;
  platform: string;
  lastTs: number;
  cpuUsage: number | null;
  memoryPercent: number | null;
  /** The fullest filesystem's `disk.<path>.percent` in the latest report; null when it had none. */
  diskPercent: number | null;
  /**
   * The host's own reporting interval: the gap between its two latest reports
   * (null after one report). Status (up / late / down) is judged against it,
   * not a fixed timeout, since agents run at different cadences.
   */
  intervalMs: number | null;
}

export interface MetricLimits {
  /** Distinct metric names one host may ever report. */
  perHost: number;
  /** Distinct metric names across the tenant's hosts. */
  perTenant: number;
  /** Hosts a tenant may have at once (retention's removals free places). */
  hostsPerTenant: number;
}
