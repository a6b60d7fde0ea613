import { Type, type Static } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import type { MetricsStore } from '../domain/metrics-store.js';
import { readAggregate, readHostSeries, resolveRange, type SeriesQuery, type SeriesSettings } from '../domain/series.js';
import { authenticate, requestTenant, type SessionReader } from '../http/authenticate.js';
import { sendSeries } from './series-json.js';
import { AggregateSeriesSchema, AUTH_ERRORS, LOAD_SHED_ERROR, BEARER, HostSeriesSchema, SeriesQuerySchema, errorResponses } from './schemas.js';

export interface SeriesRouteDeps {
  store: MetricsStore;
  settings: SeriesSettings;
  now: () => number;
  /** The dashboard's session cookie, accepted on these GETs besides the bearer token. */
  readSession?: SessionReader | undefined;
}

/**
 * A series answer is sent as bytes by sendSeries, never through a serializer
 * compiled from its schema (which would test each of thousands of numbers
 * against number-or-null); this one serializes what else these routes send.
 * The domain functions build exactly the documented fields, so nothing extra
 * can leak through.
 */
const plainJson = () => (data: unknown) => JSON.stringify(data);

/** The query as the domain takes it: `metrics` split into names. */
function seriesQuery(q: Static<typeof SeriesQuerySchema>): SeriesQuery {
  const { metrics, ...rest } = q;
  return { ...rest, ...(metrics !== undefined ? { metrics: [...new Set(metrics.split(','))] } : {}) };
}

/** GET /api/v1/hosts, /api/v1/host/:id and /api/v1/aggregate: reads, always within the token's tenant. */
export function registerSeriesRoutes(app: App, deps: SeriesRouteDeps): void {
  const onRequest = authenticate(deps.store, deps.readSession);

  app.get('/api/v1/hosts', {
    onRequest,
    schema: {
      summary: 'List the tenant\'s host ids',
      tags: ['series'],
      security: BEARER,
      response: {
        200: Type.Array(Type.String(), { description: 'Host ids (agentIds), sorted.' }),
        ...errorResponses(AUTH_ERRORS),
      },
    },
  }, async (request) => deps.store.listHosts(requestTenant(request).tenantId));

  app.get('/api/v1/host/:id', {
    onRequest,
    config: { expensive: true },
    serializerCompiler: plainJson,
    schema: {
      summary: 'One host\'s series',
      description: 'Raw reports when they fit the point budget; otherwise per-metric means over equal-width buckets aligned to multiples of their width.',
      tags: ['series'],
      security: BEARER,
      params: Type.Object({ id: Type.String({ description: 'Host id (the agentId).' }) }),
      querystring: SeriesQuerySchema,
      response: {
        200: HostSeriesSchema,
        ...errorResponses({
          invalid_request: '`from`, `to` or `points` not a decimal integer, `from` after `to`, or `points` above the cap.',
          not_found: 'No such host in this tenant (identical whether it exists in another tenant or nowhere).',
          ...AUTH_ERRORS,
          ...LOAD_SHED_ERROR,
        }),
      },
    },
  }, async (request, reply) => {
    const range = resolveRange(seriesQuery(request.query), deps.settings, deps.now());
    return sendSeries(reply, await readHostSeries(deps.store, requestTenant(request).tenantId, request.params.id, range));
  });

  app.get('/api/v1/aggregate', {
    onRequest,
    config: { expensive: true },
    serializerCompiler: plainJson,
    schema: {
      summary: 'Average series across the tenant\'s hosts',
      description: 'Always bucketed (buckets at least 10 s wide, aligned to multiples of their width): per bucket and metric, the mean of every sample of the tenant\'s hosts.',
      tags: ['series'],
      security: BEARER,
      querystring: SeriesQuerySchema,
      response: {
        200: AggregateSeriesSchema,
        ...errorResponses({
          invalid_request: '`from`, `to` or `points` not a decimal integer, `from` after `to`, or `points` above the cap.',
          limit_exceeded: 'The tenant\'s metric names times the buckets would pass 2,000,000 values; details name the largest budget that fits.',
          ...AUTH_ERRORS,
          ...LOAD_SHED_ERROR,
        }),
      },
    },
  }, async (request, reply) => {
    const range = resolveRange(seriesQuery(request.query), deps.settings, deps.now());
    return sendSeries(reply, await readAggregate(deps.store, requestTenant(request).tenantId, range));
  });
}
