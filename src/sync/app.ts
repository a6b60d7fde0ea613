import { createHttpApp, type App } from '../core/http/create-app.js';
import { registerOpenApi } from '../core/http/openapi.js';
import type { SyncDeps } from './deps.js';
import { dummyHash } from './accounts/password-hash.js';
import { registerAuthRoutes } from './http/auth-routes.js';
import { registerBusinessRoutes } from './businesses/business-routes.js';
import { registerChangeRoutes } from './changes/change-routes.js';
import { registerAttachmentRoutes } from './attachments/attachment-routes.js';
import { registerUploadRoutes } from './attachments/upload-routes.js';
import { sweepUploads } from './attachments/resumable-uploads.js';
import { registerFeedRoutes } from './feed/feed-routes.js';
import { registerExampleRoutes } from './http/example-routes.js';
import { FEED_DEFAULTS } from './feed/feed-hub.js';
import { registerOperations } from '../core/ops/register-operations.js';
import { useStrictJsonParser } from './http/json-body.js';
import { limitIp } from './http/rate-limit.js';
import { drainEarlyAnswers } from './http/bounded-drain.js';
import { enforceRequestDeadlines, REQUEST_DEADLINES, type RequestDeadlines } from './http/request-deadlines.js';
import { startExpiryCleanup } from '../core/storage/expiry-cleanup.js';
import { SYNC_CLEANUP_INTERVAL_MS, syncExpiryRules } from './storage/expiry-rules.js';

export interface BuildSyncAppOptions {
  /** Log destination (tests); stdout by default. */
  logStream?: NodeJS.WritableStream;
  /** Overrides of the body deadlines (tests shorten them to watch them fire). */
  deadlines?: Partial<RequestDeadlines>;
}

/**
 * Builds the sync service's HTTP app from its dependencies; `server.ts` runs it.
 * The OpenAPI document is generated from the route schemas and served at
 * `GET /api/openapi.json`.
 */
export async function buildSyncApp(deps: SyncDeps, options: BuildSyncAppOptions = {}): Promise<App> {
  const { config } = deps;
  const app = createHttpApp({
    name: 'sync',
    logLevel: config.logLevel,
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustProxy,
    // Node's one total request timeout would cut off slow uploads; enforceRequestDeadlines bounds bodies instead.
    timeouts: { requestTimeoutMs: 0 },
    ...(options.logStream ? { logStream: options.logStream } : {}),
    loadShedding: {
      maxInFlight: config.maxExpensiveInFlight,
      maxInFlightPerPrincipal: config.maxExpensivePerPrincipal,
      maxEventLoopDelayMs: config.maxEventLoopDelayMs,
      // Set by requireUser, which runs before the handler the shedder wraps.
      principal: (req) => (req as { caller?: { userId: string } }).caller?.userId,
    },
  });

  useStrictJsonParser(app);
  enforceRequestDeadlines(app, { ...REQUEST_DEADLINES, ...options.deadlines });
  drainEarlyAnswers(app);
  // A request for a route that does not exist has no token any route checked: it counts as unauthenticated (path scanning is throttled per IP).
  app.addHook('onRequest', async (req) => { if (req.is404) await limitIp(deps, req); });
  // So does one the router refuses before any hook (a malformed escape, an over-long id).
  app.refusedRequests.limit = (req) => limitIp(deps, req);

  await registerOpenApi(app, {
    title: 'Business data sync service', version: '1.0.0', path: '/api/openapi.json',
    description: 'See docs/sync-api.md for the rules behind each endpoint.',
    bearerDescription: 'A user token (register/login/refresh) or a business-scoped token (POST /api/auth/token)',
  });
  // /healthz, /readyz, /metrics and per-route request metrics (docs/deployment.md).
  registerOperations(app, { selfMetrics: deps.selfMetrics, metricsToken: config.metricsToken, db: deps.database.db, redis: deps.redis });

  // Logins for unknown e-mails verify against this hash; computing it now keeps the first such login as slow as any other.
  await dummyHash(config.scryptLog2N);

  registerAuthRoutes(app, deps);
  registerBusinessRoutes(app, deps);

  registerChangeRoutes(app, deps);
  registerAttachmentRoutes(app, deps);
  registerUploadRoutes(app, deps);
  registerFeedRoutes(app, deps, { ...FEED_DEFAULTS, heartbeatMs: deps.config.feedHeartbeatMs });
  registerExampleRoutes(app);

  // Expired tokens, old resolved conflicts and expired uploads go in small batches, on every instance, while the app is up.
  let stopCleanup: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    stopCleanup = startExpiryCleanup({
      database: deps.database,
      rules: syncExpiryRules(config),
      tasks: [{ name: 'upload_sessions', run: (now) => sweepUploads(deps, now) }],
      intervalMs: SYNC_CLEANUP_INTERVAL_MS,
      now: deps.now,
      onRun: (r) => {
        if ('error' in r) app.log.error({ err: r.error }, 'expiry cleanup failed');
        else if (Object.values(r).some((n) => n > 0)) app.log.info({ removed: r }, 'expiry cleanup removed expired rows');
      },
    });
  });
  app.addHook('onClose', async () => { await stopCleanup?.(); });

  return app;
}
