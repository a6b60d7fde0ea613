import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../errors.js';
import { parseBearer, safeEqual } from '../auth/tokens.js';
import '../http/rate-limit-exempt.js';
import { ErrorSchema } from '../http/openapi.js';
import type { DiskGuard } from '../storage/disk-guard.js';

/**
 * One instance's own metrics, in a registry of its own (never prom-client's
 * global one, so two apps in one process, as in tests, never mix). Request
 * counts and latencies are recorded for every route; services add their
 * counters and gauges through `counter`/`gauge`.
 */
export interface SelfMetrics {
  readonly registry: Registry;
  /** Requests refused with 429 (a rate limit or a lockout), by route pattern; counted by `registerSelfMonitoring`. */
  readonly rateLimitRejections: Counter<'route'>;
  counter<L extends string = never>(name: string, help: string, labelNames?: readonly L[]): Counter<L>;
  gauge<L extends string = never>(name: string, help: string, labelNames?: readonly L[]): Gauge<L>;
}

/** Latency buckets in seconds: from a cached read to a slow batched write. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createSelfMetrics(service: string): SelfMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  const counter = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers: [registry] });
  const gauge = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Gauge<L>({ name, help, labelNames, registers: [registry] });
  return {
    registry,
    rateLimitRejections: counter('rate_limit_rejections_total', 'Requests refused with 429 by a rate limit or a login lockout, by route pattern.', ['route']),
    counter,
    gauge,
  };
}

/**
 * The free-space floor's state as VictoriaMetrics shows its own (`vm_free_disk_space_bytes`, `vm_storage_is_read_only`):
 * free bytes of each watched directory, and 1 while bulk writes are refused for want of space. Read at each scrape.
 */
export function exposeDiskGuard(metrics: SelfMetrics, guard: Pick<DiskGuard, 'readings' | 'paused'>): void {
  new Gauge({
    name: 'storage_free_bytes', help: 'Free bytes (as an unprivileged process sees them) under each directory --min-free-disk-bytes watches.',
    labelNames: ['dir'], registers: [metrics.registry],
    collect() { this.reset(); for (const r of guard.readings()) this.set({ dir: r.dir }, r.freeBytes); },
  });
  new Gauge({
    name: 'storage_writes_refused', help: '1 while ingest (metrics) or pushes and uploads (sync) get 503 because free space is under --min-free-disk-bytes.',
    registers: [metrics.registry],
    collect() { this.set(guard.paused() ? 1 : 0); },
  });
}

export interface SelfMonitoringOptions {
  /** Bearer token Prometheus presents; without one `/metrics` is not served at all (404). */
  token: string | undefined;
}

/**
 * Counts every request by method, route pattern and status (and every 429
 * as a rate-limit rejection, whichever limit or lockout refused it), and serves the
 * registry as Prometheus text at `/metrics` to holders of the metrics token.
 * The route label is the route's pattern (`/api/v1/host/:id`), never the raw
 * URL: ids in paths would make the series unbounded. Unmatched requests are
 * labelled `unmatched`.
 */
export function registerSelfMonitoring(app: FastifyInstance, metrics: SelfMetrics, opts: SelfMonitoringOptions): void {
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [metrics.registry],
  });
  const latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from request received to response sent, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'],
    buckets: LATENCY_BUCKETS,
    registers: [metrics.registry],
  });

  const count = (method: string, route: string, status: number, elapsedMs: number) => {
    const labels = { method, route, status: String(status) };
    requests.inc(labels);
    latency.observe(labels, elapsedMs / 1000);
    if (status === 429) metrics.rateLimitRejections.inc({ route });
  };
  app.addHook('onResponse', async (req, reply) => { count(req.method, routeLabel(req), reply.statusCode, reply.elapsedTime); });
  app.refusedRequests.observe = (req, status, elapsedMs) => count(req.method, 'unmatched', status, elapsedMs);

  const token = opts.token;
  if (!token) return;
  app.get('/metrics', {
    config: { rateLimit: false },
    schema: {
      summary: 'Prometheus metrics of this instance (bearer: the metrics token)',
      tags: ['operations'],
      response: { 200: Type.String(), 401: { ...ErrorSchema, description: 'Missing or wrong metrics token.' } },
    },
  }, async (req, reply) => {
    const presented = parseBearer(req.headers.authorization);
    if (!presented || !safeEqual(presented, token)) {
      void reply.header('www-authenticate', 'Bearer realm="metrics"');
      throw new AppError('unauthorized', 'a valid metrics token is required');
    }
    void reply.header('cache-control', 'no-store').type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}

function routeLabel(req: FastifyRequest): string {
  return req.routeOptions.url ?? 'unmatched';
}
