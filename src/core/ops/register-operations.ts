import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Redis } from 'ioredis';
import { registerHealth, type ReadinessCheck } from './health.js';
import { databaseCheck, redisCheck } from './readiness-checks.js';
import { registerSelfMonitoring, type SelfMetrics } from './self-metrics.js';

export interface OperationsOptions<DB> {
  selfMetrics: SelfMetrics;
  /** `--metrics-token`; without it `/metrics` is not served. */
  metricsToken: string | undefined;
  /** The service's database; `/readyz` requires it to answer. */
  db: Kysely<DB>;
  /** The shared Redis connection when configured; `/readyz` then requires it too. */
  redis: Redis | undefined;
}

/**
 * The operations surface every service exposes, in one call from its app:
 * `/healthz`, `/readyz` (database, and Redis when configured), request
 * metrics for every route and the token-protected `/metrics`.
 */
export function registerOperations<DB>(app: FastifyInstance, opts: OperationsOptions<DB>): void {
  const checks: Record<string, ReadinessCheck> = { database: databaseCheck(opts.db) };
  if (opts.redis) checks['redis'] = redisCheck(opts.redis);
  registerHealth(app, { checks });
  registerSelfMonitoring(app, opts.selfMetrics, { token: opts.metricsToken });
}
