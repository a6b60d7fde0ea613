import { AppError } from '../../core/errors.js';
import type { Alert } from '../alerts/alert.js';
import type { AlertContext, AlertResult, AlertRouter } from '../alerts/alert-router.js';
import { flattenReport } from './flatten.js';
import type { AppendOutcome, MetricsStore, NewReport } from './metrics-store.js';
import type { Report } from './report-schema.js';
import type { ResolvedTenant } from './tenant-tokens.js';

export interface IngestDeps {
  store: MetricsStore;
  alertRouter: AlertRouter;
  now: () => number;
  /** How far past `now` a report ts may be. */
  maxFutureMs: number;
  /** Reports older than this are refused: the retention sweep would delete them anyway. */
  retentionMs: number;
}

export interface IngestResult {
  hostId: string;
  ts: number;
  /** Metrics stored from this report. */
  metrics: number;
  /** True when the same host already reported this ts: nothing was changed and alerts were not routed again. */
  duplicate: boolean;
  /** One entry per alert and matching route. */
  alertResults: AlertResult[];
}

/**
 * The ts checks a schema-valid report must pass before storage (not too far
 * ahead, not older than the retention), shared by single and bulk ingest, as
 * is flattening (flatten.ts), so both refuse exactly the same reports with the
 * same details. Throws `invalid_request`.
 */
export function assertReportTs(deps: Pick<IngestDeps, 'now' | 'maxFutureMs' | 'retentionMs'>, report: Report): void {
  const now = deps.now();
  if (report.ts > now + deps.maxFutureMs) {
    throw new AppError('invalid_request', `body ts: ${report.ts} is more than ${deps.maxFutureMs} ms ahead of the server clock (${now})`);
  }
  if (report.ts < now - deps.retentionMs) {
    throw new AppError('invalid_request', `body ts: ${report.ts} is older than the retention of ${deps.retentionMs} ms`);
  }
}

/** A checked report of the tenant, as the store takes it. */
export function prepareReport(deps: Pick<IngestDeps, 'now' | 'maxFutureMs' | 'retentionMs'>, tenant: ResolvedTenant, report: Report): NewReport {
  assertReportTs(deps, report);
  return { tenantId: tenant.tenantId, hostId: report.agentId, hostname: report.hostname, platform: report.platform, ts: report.ts, metrics: flattenReport(report) };
}

/** Routes the alerts of a report the store just accepted; a duplicate's alerts were routed the first time. */
async function routeAlerts(deps: IngestDeps, prepared: NewReport, report: Report, outcome: AppendOutcome): Promise<IngestResult> {
  if (outcome.status === 'limit_exceeded') throw new AppError('limit_exceeded', outcome.details);
  const duplicate = outcome.status === 'duplicate';
  // Every stored report goes to the router, with or without alerts: an alert it no longer carries is resolved.
  const alertResults = duplicate
    ? []
    : await deps.alertRouter.route({ tenantId: prepared.tenantId, hostId: prepared.hostId, hostname: report.hostname, ts: report.ts }, report.alerts ?? []);
  return { hostId: prepared.hostId, ts: report.ts, metrics: prepared.metrics.size, duplicate, alertResults };
}

/**
 * Stores one validated report for the tenant, then routes its alerts. The
 * report is durable before any webhook is called, so an alert receiver never
 * hears of a report the service could still lose.
 */
export async function ingestReport(deps: IngestDeps, tenant: ResolvedTenant, report: Report, signal?: AbortSignal): Promise<IngestResult> {
  const prepared = prepareReport(deps, tenant, report);
  return routeAlerts(deps, prepared, report, await deps.store.appendReport(prepared, signal));
}

/**
 * One line of a bulk body: a schema-valid report, a report already checked
 * and prepared (in a parse thread) with its alerts, or why the line was
 * refused before storage (`of`: the report's host and ts, when it was one).
 */
export type BulkItem =
  | { line: number; report: Report }
  | { line: number; prepared: NewReport; alerts: Alert[] }
  | { line: number; error: AppError; of?: { hostId: string; ts: number } };

export type BulkLineResult =
  | { line: number; status: 'stored' | 'duplicate'; hostId: string; ts: number; alertResults: AlertResult[] }
  | { line: number; status: 'rejected'; hostId?: string; ts?: number; error: string; details?: string };

export interface BulkResult {
  stored: number;
  duplicates: number;
  rejected: number;
  /** One entry per non-blank line, in line order. */
  results: BulkLineResult[];
  /** Metric values stored (self-metrics; not part of the answer). */
  samples: number;
}

function rejected(line: number, e: AppError, of?: { hostId: string; ts: number }): BulkLineResult {
  return {
    line, status: 'rejected',
    ...(of ? { hostId: of.hostId, ts: of.ts } : {}),
    error: e.code, ...(e.details ? { details: e.details } : {}),
  };
}

/**
 * Bulk ingest: every line gets the single-ingest checks, and all the valid
 * reports are stored with one `appendReports` call (one durable commit), then
 * the alerts of the newly stored ones are routed, in line order. A refused
 * line never fails the others. `items` is read once, line by line.
 */
export async function ingestReports(deps: IngestDeps, tenant: ResolvedTenant, items: Iterable<BulkItem>, signal?: AbortSignal): Promise<BulkResult> {
  const results = new Map<number, BulkLineResult>();
  const lines: number[] = [];
  let samples = 0;
  // Each valid report is prepared as the store reads it, and only what routing and the answer need is kept: a
  // body's thousand parsed reports and metric maps never live at once, so they die in the young generation instead
  // of being copied by each scavenge until the commit (collections were a third of bulk ingest's event loop: docs/benchmarks.md).
  const valid: Array<{ line: number; ctx: AlertContext; alerts: Alert[]; metrics: number }> = [];
  function* prepared(): Generator<NewReport> {
    for (const item of items) {
      lines.push(item.line);
      if ('error' in item) { results.set(item.line, rejected(item.line, item.error, item.of)); continue; }
      let ready: NewReport;
      let alerts: Alert[];
      if ('prepared' in item) {
        ready = item.prepared;
        alerts = item.alerts;
      } else {
        const report = item.report;
        try {
          ready = prepareReport(deps, tenant, report);
        } catch (e: unknown) {
          if (!(e instanceof AppError)) throw e;
          results.set(item.line, rejected(item.line, e, { hostId: report.agentId, ts: report.ts }));
          continue;
        }
        alerts = report.alerts ?? [];
      }
      valid.push({ line: item.line, ctx: { tenantId: ready.tenantId, hostId: ready.hostId, hostname: ready.hostname, ts: ready.ts }, alerts, metrics: ready.metrics.size });
      yield ready;
    }
  }
  const outcomes = await deps.store.appendReports(prepared(), signal);
  // Every stored report is routed (an alert it no longer carries is resolved), in line order, in one call: the
  // router skips the look-ups a backlog's alert-free reports of a host with nothing open cannot need.
  const stored: typeof valid = [];
  for (const [i, v] of valid.entries()) {
    const outcome = outcomes[i]!;
    if (outcome.status === 'limit_exceeded') results.set(v.line, rejected(v.line, new AppError('limit_exceeded', outcome.details), v.ctx));
    else if (outcome.status === 'duplicate') results.set(v.line, { line: v.line, status: 'duplicate', hostId: v.ctx.hostId, ts: v.ctx.ts, alertResults: [] });
    else { stored.push(v); samples += v.metrics; }
  }
  const routed = await deps.alertRouter.routeAll(stored.map((v) => ({ ctx: v.ctx, alerts: v.alerts })));
  for (const [i, v] of stored.entries()) results.set(v.line, { line: v.line, status: 'stored', hostId: v.ctx.hostId, ts: v.ctx.ts, alertResults: routed[i]! });
  const ordered = lines.map((line) => results.get(line)!);
  const count = (s: BulkLineResult['status']) => ordered.filter((r) => r.status === s).length;
  return { stored: count('stored'), duplicates: count('duplicate'), rejected: count('rejected'), results: ordered, samples };
}
