import { createHttpApp, type App } from '../core/http/create-app.js';
import { registerOpenApi } from '../core/http/openapi.js';
import { registerOperations } from '../core/ops/register-operations.js';
import type { MetricsConfig } from './config.js';
import type { MetricsDeps } from './deps.js';
import { registerDashboard } from './dashboard/dashboard-routes.js';
import { startSessionCleanup } from './dashboard/session-cleanup.js';
import { createSessionDeps, createSessionReader } from './dashboard/session-cookie.js';
import type { DashboardSessionTables } from './dashboard/session-store.js';
import { startRetentionSweep } from './domain/retention.js';
import { registerIngestRoute } from './routes/ingest.js';
import { registerFleetReadRoutes } from './routes/fleet-reads.js';
import { registerBulkIngestRoute } from './routes/ingest-bulk.js';
import { registerSeriesRoutes } from './routes/series.js';
import './http/authenticate.js';

const DAY_MS = 86_400_000;

/**
 * Builds the metrics service's HTTP app from its config and dependencies;
 * listening and signals belong to server.ts. The retention sweep runs while
 * the app is up (from ready to close).
 */
export async function buildMetricsApp(config: MetricsConfig, deps: MetricsDeps, opts: { logStream?: NodeJS.WritableStream } = {}): Promise<App> {
  const app = createHttpApp({
    name: 'metrics',
    logLevel: config.logLevel,
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustProxy,
    ...(opts.logStream ? { logStream: opts.logStream } : {}),
    loadShedding: {
      maxInFlight: config.maxExpensiveInFlight,
      maxInFlightPerPrincipal: config.maxExpensivePerPrincipal,
      maxEventLoopDelayMs: config.maxEventLoopDelayMs,
      principal: (req) => req.tenant?.tenantId,
    },
  });
  // Response schemas document the API (OpenAPI); replies are plain JSON.stringify so no field is silently dropped.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  await registerOpenApi(app, {
    title: 'fleetsync metrics service', version: '0.1.0', path: '/api/v1/openapi.json',
    description: 'Host metrics ingest, per-tenant series and fleet aggregates. See docs/metrics-api.md.',
    bearerDescription: 'Tenant token from `metrics-service token create <tenant>`.',
  });
  // /healthz, /readyz, /metrics and per-route request metrics (docs/deployment.md). The metrics service needs no Redis.
  registerOperations(app, { selfMetrics: deps.selfMetrics, metricsToken: config.metricsToken, db: deps.database.db, redis: undefined });
  const retentionMs = config.retentionDays * DAY_MS;
  await registerIngestRoute(app, { store: deps.store, alertRouter: deps.alertRouter, now: deps.now, maxFutureMs: config.maxFutureMs, retentionMs, secret: config.secret, bodyLimit: config.bodyLimit, selfMetrics: deps.selfMetrics, diskGuard: deps.diskGuard });
  await registerBulkIngestRoute(app, { store: deps.store, alertRouter: deps.alertRouter, now: deps.now, maxFutureMs: config.maxFutureMs, retentionMs, secret: config.secret, bodyLimit: config.bodyLimit, bulkBodyLimit: config.bulkBodyLimit, bulkLines: deps.bulkLines, selfMetrics: deps.selfMetrics, diskGuard: deps.diskGuard });
  const sessions = createSessionDeps(deps.database.db.withTables<DashboardSessionTables>(), deps.store, deps.now);
  const readSession = createSessionReader(sessions);
  const settings = { defaultPoints: config.seriesPoints, maxPoints: config.seriesPointsMax };
  registerSeriesRoutes(app, { store: deps.store, now: deps.now, settings, readSession });
  registerFleetReadRoutes(app, { store: deps.store, alerts: deps.alerts, now: deps.now, settings, readSession });
  await registerDashboard(app, { store: deps.store, alerts: deps.alerts, sessions, settings, now: deps.now, ingestPaused: deps.diskGuard.paused });

  let stopSweep: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    stopSweep = startRetentionSweep({ store: deps.store, alerts: deps.alerts }, {
      retentionMs,
      intervalMs: config.retentionSweepMs,
      now: deps.now,
      onSweep: (r) => {
        if ('error' in r) app.log.error({ err: r.error }, 'retention sweep failed');
        else if (r.reports || r.hosts || r.incidents) app.log.info(r, 'retention sweep removed expired data');
      },
    });
  });
  app.addHook('onClose', async () => { await stopSweep?.(); });
  let stopSessionCleanup: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => { stopSessionCleanup = startSessionCleanup(deps.database, deps.now, app.log, config.sessionCleanupMs); });
  app.addHook('onClose', async () => { await stopSessionCleanup?.(); });
  return app;
}
