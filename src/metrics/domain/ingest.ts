import { AppError } from '../../core/errors.js';
import type { AlertResult, AlertRouter } from '../alerts/alert-router.js';
import { flattenReport } from './flatten.js';
import type { MetricsStore } from './metrics-store.js';
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
 * Stores one validated report for the tenant, then routes its alerts. The
 * report is durable before any webhook is called, so an alert receiver never
 * hears of a report the service could still lose.
 */
export async function ingestReport(deps: IngestDeps, tenant: ResolvedTenant, report: Report): Promise<IngestResult> {
  const now = deps.now();
  if (report.ts > now + deps.maxFutureMs) {
    throw new AppError('invalid_request', `body ts: ${report.ts} is more than ${deps.maxFutureMs} ms ahead of the server clock (${now})`);
  }
  if (report.ts < now - deps.retentionMs) {
    throw new AppError('invalid_request', `body ts: ${report.ts} is older than the retention of ${deps.retentionMs} ms`);
  }
  const metrics = flattenReport(report);
  const hostId = report.agentId;
  const outcome = await deps.store.appendReport({
    tenantId: tenant.tenantId,
    hostId,
    hostname: report.hostname,
    platform: report.platform,
    ts: report.ts,
    metrics,
  });
  if (outcome.status === 'limit_exceeded') throw new AppError('limit_exceeded', outcome.details);
  const duplicate = outcome.status === 'duplicate';
  // Every stored report goes to the router, with or without alerts: an alert it no longer carries is resolved.
  const alertResults = duplicate
    ? []
    : await deps.alertRouter.route({ tenantId: tenant.tenantId, hostId, hostname: report.hostname, ts: report.ts }, report.alerts ?? []);
  return { hostId, ts: report.ts, metrics: metrics.size, duplicate, alertResults };
}
