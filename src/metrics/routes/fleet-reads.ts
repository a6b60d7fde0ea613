import { Type, type TSchema } from 'typebox';
import { AppError } from '../../core/errors.js';
import type { App } from '../../core/http/create-app.js';
import { SEVERITIES } from '../alerts/alert.js';
import type { AlertStore, StoredAlert } from '../alerts/alert-store.js';
import { withStatus } from '../domain/host-status.js';
import type { MetricsStore } from '../domain/metrics-store.js';
import { AGENT_ID_PATTERN } from '../domain/report-text.js';
import { resolveRange, type SeriesSettings } from '../domain/series.js';
import { readHostSparks, readTopHosts, readTopHostsBy } from '../domain/top-hosts.js';
import { authenticate, requestTenant, type SessionReader } from '../http/authenticate.js';
import { AUTH_ERRORS, BEARER, errorResponses, LOAD_SHED_ERROR, metricNameList } from './schemas.js';

export interface FleetReadDeps {
  store: MetricsStore;
  alerts: AlertStore;
  settings: SeriesSettings;
  now: () => number;
  readSession?: SessionReader | undefined;
}

/** Default and largest `limit` of /api/v1/alerts. */
export const ALERT_LIST_LIMITS = { default: 100, max: 1000 } as const;
/** Default range of /api/v1/alerts when `from` is absent: the last day. */
export const ALERT_DEFAULT_RANGE_MS = 86_400_000;

const Timestamp = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Epoch milliseconds.' });
const RangeQuery = {
  from: Type.Optional({ ...Timestamp, description: 'Range start, epoch ms, inclusive. Default: `to` minus one hour.' }),
  to: Type.Optional({ ...Timestamp, description: 'Range end, epoch ms, inclusive. Default: now.' }),
};
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const RANGE_ERROR = '`from`/`to`/`limit`/`points` not an integer or out of range, or `from` after `to`.';

const HostStatusSchema = Type.Object({
  now: Timestamp,
  counts: Type.Object({ up: Type.Integer(), late: Type.Integer(), down: Type.Integer() }),
  hosts: Type.Array(Type.Object({
    hostId: Type.String(),
    hostname: Type.String(),
    platform: Type.String(),
    lastTs: Timestamp,
    cpuUsage: Nullable(Type.Number()),
    memoryPercent: Nullable(Type.Number()),
    diskPercent: Nullable(Type.Number({ description: 'The fullest filesystem\'s percent in the latest report.' })),
    intervalMs: Nullable(Type.Integer({ description: 'Gap between the host\'s two latest reports; null after one report.' })),
    status: Type.Union([Type.Literal('up'), Type.Literal('late'), Type.Literal('down')]),
  })),
});

const TopEntrySchema = Type.Object({
  hostId: Type.String(), hostname: Type.String(),
  value: Type.Number({ description: 'Mean over the range.' }),
  metric: Type.String({ description: 'The metric ranked (for `disk`, the filesystem\'s percent metric).' }),
});

const AlertSchema = Type.Object({
  id: Type.Integer(),
  hostId: Type.String(),
  name: Type.String(),
  severity: Type.Union([Type.Literal(SEVERITIES[0]), Type.Literal(SEVERITIES[1]), Type.Literal(SEVERITIES[2])]),
  message: Type.Union([Type.String(), Type.Null()]),
  labels: Type.Record(Type.String(), Type.String()),
  value: Nullable(Type.Number()),
  threshold: Nullable(Type.Number()),
  startsAt: { ...Timestamp, description: 'ts of the first report that carried the alert.' },
  lastSeenAt: { ...Timestamp, description: 'ts of the latest report that carried it.' },
  resolvedAt: Type.Union([Timestamp, Type.Null()], { description: 'ts of the first later report without it; null while firing.' }),
  routes: Type.Array(Type.Object({
    route: Type.String(),
    outcome: Type.Union([Type.Literal('delivered'), Type.Literal('failed'), Type.Literal('sending')], { description: '`sending`: a notification in flight.' }),
    notifiedAt: Timestamp,
    status: Type.Optional(Type.Integer()),
    error: Type.Optional(Type.String()),
    resolvedOutcome: Type.Optional(Type.Union([Type.Literal('delivered'), Type.Literal('failed'), Type.Literal('sending')])),
  }), { description: 'The latest notification to each route the alert matched.' }),
});

/** The public shape of an incident: no tenant id, route state as a list. */
export function alertView(a: StoredAlert) {
  return {
    id: a.id, hostId: a.hostId, name: a.name, severity: a.severity, message: a.message, labels: a.labels,
    value: a.value, threshold: a.threshold, startsAt: a.startsAt, lastSeenAt: a.lastSeenAt, resolvedAt: a.resolvedAt,
    routes: Object.entries(a.routes).map(([route, s]) => ({
      route, outcome: s.outcome, notifiedAt: s.notifiedAt,
      ...(s.status !== undefined ? { status: s.status } : {}),
      ...(s.error !== undefined ? { error: s.error } : {}),
      ...(s.resolved ? { resolvedOutcome: s.resolved.outcome } : {}),
    })),
  };
}

/**
 * The dashboard's reads (host status, top hosts, sparklines, alerts): JSON
 * endpoints like the series ones, tenant-scoped, open to a bearer token or,
 * for these GETs, the signed-in dashboard's session cookie.
 */
export function registerFleetReadRoutes(app: App, deps: FleetReadDeps): void {
  const onRequest = authenticate(deps.store, deps.readSession);

  app.get('/api/v1/hosts/status', {
    onRequest,
    schema: {
      summary: 'Every host with its latest numbers and status (up / late / down)',
      description: 'Status is judged against each host\'s own reporting interval: late after 2 intervals of silence, down after 5 (docs/metrics-api.md).',
      tags: ['dashboard data'],
      security: BEARER,
      response: { 200: HostStatusSchema, ...errorResponses(AUTH_ERRORS) },
    },
  }, async (request) => {
    const now = deps.now();
    return { now, ...withStatus(await deps.store.latestByHost(requestTenant(request).tenantId), now) };
  });

  app.get('/api/v1/top', {
    onRequest,
    // Reads every host of the tenant: bounded with the series reads (load shedding).
    config: { expensive: true },
    schema: {
      summary: 'Hosts ranked by a metric\'s mean over the range',
      tags: ['dashboard data'],
      security: BEARER,
      querystring: Type.Object({
        metric: Type.String({ minLength: 1, maxLength: 256, description: 'A metric name (`cpu.usage`, `memory.percent`), or `disk` for each host\'s fullest filesystem.' }),
        ...RangeQuery,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'How many hosts (default 10).' })),
      }),
      response: {
        200: Type.Array(TopEntrySchema, { description: 'Highest first; hosts without the metric in range are left out.' }),
        ...errorResponses({ invalid_request: RANGE_ERROR, ...AUTH_ERRORS, ...LOAD_SHED_ERROR }),
      },
    },
  }, async (request) => {
    const { metric, limit, from, to } = request.query;
    const range = resolveRange({ from, to }, deps.settings, deps.now());
    return readTopHosts(deps.store, requestTenant(request).tenantId, metric, range, limit ?? 10);
  });

  app.get('/api/v1/top/lists', {
    onRequest,
    // Reads every host of the tenant: bounded with the series reads (load shedding).
    config: { expensive: true },
    schema: {
      summary: 'Several top lists in one pass over the hosts (the fleet page\'s three)',
      tags: ['dashboard data'],
      security: BEARER,
      querystring: Type.Object({
        metrics: metricNameList(10, 'Up to 10 comma-separated metrics as `metric` of /api/v1/top (`disk` for the fullest filesystem).'),
        ...RangeQuery,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Hosts per list (default 10).' })),
      }),
      response: {
        200: Type.Object({
          hosts: Type.Integer({ description: 'Hosts with reports in the range.' }),
          lists: Type.Record(Type.String(), Type.Array(TopEntrySchema), { description: 'Each asked metric -> its list, as /api/v1/top answers it.' }),
        }),
        ...errorResponses({ invalid_request: RANGE_ERROR, ...AUTH_ERRORS, ...LOAD_SHED_ERROR }),
      },
    },
  }, async (request) => {
    const { metrics, limit, from, to } = request.query;
    const range = resolveRange({ from, to }, deps.settings, deps.now());
    const asked = [...new Set(metrics.split(','))];
    const top = await readTopHostsBy(deps.store, requestTenant(request).tenantId, asked, range, limit ?? 10);
    return { hosts: top.hosts, lists: Object.fromEntries(top.ranked) };
  });

  app.get('/api/v1/sparklines', {
    onRequest,
    // Reads every host of the tenant: bounded with the series reads (load shedding).
    config: { expensive: true },
    schema: {
      summary: 'One metric\'s small series for every host (the host list\'s sparklines)',
      tags: ['dashboard data'],
      security: BEARER,
      querystring: Type.Object({
        metric: Type.String({ minLength: 1, maxLength: 256, description: 'Metric name, e.g. cpu.usage.' }),
        ...RangeQuery,
        points: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, description: 'Points per host (default 60).' })),
      }),
      response: {
        200: Type.Array(Type.Object({
          hostId: Type.String(),
          timestamps: Type.Array(Timestamp),
          values: Type.Array(Nullable(Type.Number())),
        })),
        ...errorResponses({ invalid_request: RANGE_ERROR, ...AUTH_ERRORS, ...LOAD_SHED_ERROR }),
      },
    },
  }, async (request) => {
    const { metric, points, from, to } = request.query;
    const range = resolveRange({ from, to, points: points ?? 60 }, deps.settings, deps.now());
    return readHostSparks(deps.store, requestTenant(request).tenantId, metric, range);
  });

  app.get('/api/v1/alerts', {
    onRequest,
    schema: {
      summary: 'Alerts that arrived in reports, newest first',
      description: 'One entry per incident (an alert from the first report carrying it until the first report without it), with each route\'s latest notification outcome.',
      tags: ['alerts'],
      security: BEARER,
      querystring: Type.Object({
        host: Type.Optional(Type.String({ pattern: AGENT_ID_PATTERN, description: 'Only this host\'s alerts (a host id: what a report\'s agentId allows).' })),
        from: Type.Optional({ ...Timestamp, description: 'Range start (default: `to` minus 24 h). Incidents still firing at `from` or started later are listed.' }),
        to: Type.Optional({ ...Timestamp, description: 'Range end (default: now).' }),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: ALERT_LIST_LIMITS.max, description: `At most this many (default ${ALERT_LIST_LIMITS.default}).` })),
      }),
      response: {
        200: Type.Array(AlertSchema),
        ...errorResponses({ invalid_request: `${RANGE_ERROR} Or a \`host\` that no report could carry as its agentId (a NUL, a space, \`..\`).`, ...AUTH_ERRORS }),
      },
    },
  }, async (request) => {
    const q = request.query;
    const to = q.to ?? deps.now();
    const from = q.from ?? Math.max(0, to - ALERT_DEFAULT_RANGE_MS);
    if (from > to) throw new AppError('invalid_request', `querystring from: ${from} is after to (${to})`);
    const rows = await deps.alerts.list(requestTenant(request).tenantId, { hostId: q.host, from, to, limit: q.limit ?? ALERT_LIST_LIMITS.default });
    return rows.map(alertView);
  });
}
