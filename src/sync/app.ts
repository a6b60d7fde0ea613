import { createHttpApp, type App } from '../core/http/create-app.js';
import { registerOpenApi } from '../core/http/openapi.js';
import type { SyncDeps } from './deps.js';
import { dummyHash } from './accounts/password-hash.js';
import { registerAuthRoutes } from './http/auth-routes.js';
import { registerBusinessRoutes } from './businesses/business-routes.js';
import { registerChangeRoutes } from './changes/change-routes.js';
import { registerAttachmentRoutes } from './attachments/attachment-routes.js';
import { registerFeedRoutes } from './feed/feed-routes.js';
import { FEED_DEFAULTS } from './feed/feed-hub.js';
import { registerOperations } from '../core/ops/register-operations.js';
import { startExpiryCleanup } from '../core/storage/expiry-cleanup.js';
import { SYNC_CLEANUP_INTERVAL_MS, syncExpiryRules } from './storage/expiry-rules.js';

export interface BuildSyncAppOptions {
  /** Log destination (tests); stdout by default. */
  logStream?: NodeJS.WritableStream;
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
    ...(options.logStream ? { logStream: options.logStream } : {}),
  });

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
  registerFeedRoutes(app, deps, { ...FEED_DEFAULTS, heartbeatMs: deps.config.feedHeartbeatMs });

  // Expired tokens and old resolved conflicts go in small batches, on every instance, while the app is up.
  let stopCleanup: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    stopCleanup = startExpiryCleanup({
      database: deps.database,
      rules: syncExpiryRules(config),
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
