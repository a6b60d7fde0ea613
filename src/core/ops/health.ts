import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import '../http/rate-limit-exempt.js';
import { ErrorSchema } from '../http/openapi.js';

/** A dependency probe: resolves when the dependency answers, rejects otherwise. */
export type ReadinessCheck = () => Promise<unknown>;

export interface HealthOptions {
  /** Named probes `/readyz` runs, e.g. `{ database, redis }`. */
  checks: Record<string, ReadinessCheck>;
  /** A probe slower than this counts as failed, so `/readyz` answers within a bound. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 2_000;

/**
 * `/healthz`: the process is alive and serving (200 `{"status":"ok"}`).
 * `/readyz`: every dependency answered (200 `{"status":"ready"}`), otherwise
 * 503 `{"error":"unavailable"}`; a load balancer stops sending traffic to the
 * instance. While the instance shuts down both answer 503 `unavailable` (the
 * closing hook of core/http/create-app.ts, which answers every request that
 * way; Fastify's own return503OnClosing is off), which drains it from the balancer.
 *
 * Both are unauthenticated, exempt from rate limits (`config: { rateLimit: false }`,
 * honoured by the limits of every service), and reveal nothing: not which
 * dependency failed (that goes to the log), not versions, not counts.
 */
export function registerHealth(app: FastifyInstance, opts: HealthOptions): void {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const live = { summary: 'Liveness probe', tags: ['operations'], response: { 200: Type.Object({ status: Type.Literal('ok') }), 503: { ...ErrorSchema, description: 'The instance is shutting down.' } } };
  const ready = { summary: 'Readiness probe: database and Redis reachable', tags: ['operations'], response: { 200: Type.Object({ status: Type.Literal('ready') }), 503: { ...ErrorSchema, description: 'A dependency is unreachable, or the instance is shutting down.' } } };

  app.get('/healthz', { config: { rateLimit: false }, schema: live }, async (_req, reply) => {
    void reply.header('cache-control', 'no-store');
    return { status: 'ok' };
  });

  app.get('/readyz', { config: { rateLimit: false }, schema: ready }, async (req, reply) => {
    void reply.header('cache-control', 'no-store');
    const results = await Promise.all(Object.entries(opts.checks).map(async ([name, check]) => {
      try {
        await withTimeout(check(), timeoutMs);
        return undefined;
      } catch (e: unknown) {
        req.log.warn({ check: name, err: e instanceof Error ? e.message : String(e) }, 'readiness check failed');
        return name;
      }
    }));
    if (results.some((r) => r !== undefined)) {
      return reply.code(503).send({ error: 'unavailable', details: 'a dependency is unreachable' });
    }
    return { status: 'ready' };
  });
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
