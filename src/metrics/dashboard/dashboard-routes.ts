import fastifyCookie from '@fastify/cookie';
import fastifyFormbody from '@fastify/formbody';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Type } from 'typebox';
import { AppError, isAppError } from '../../core/errors.js';
import type { App } from '../../core/http/create-app.js';
import { BEARER_SECURITY, ErrorSchema } from '../../core/http/openapi.js';
import type { AlertStore } from '../alerts/alert-store.js';
import { reportedUntil, withStatus } from '../domain/host-status.js';
import type { MetricsStore } from '../domain/metrics-store.js';
import { readHostSeries, type SeriesSettings } from '../domain/series.js';
import { FULLEST_DISK, readTopHostsBy } from '../domain/top-hosts.js';
import { tenantFromAuthorization } from '../http/authenticate.js';
import { ROWS_PER_PIECE, accountAside, dashboardPieces, parseHostListQuery } from './dashboard-page.js';
import { fleetPageParts, fleetPageRest } from './fleet-page.js';
import { hostPageParts, hostPageRest } from './host-page.js';
import { html } from './html-template.js';
import { pageLayout } from './page-layout.js';
import { isSameOriginPost } from './same-origin.js';
import { SESSION_COOKIE } from './session-cookie.js';
import { closeSession, openSession, resolveSession, type SessionDeps, type SessionTenant } from './sessions.js';
import { renderSignIn } from './signin-page.js';
import { streamPage } from './stream-page.js';
import { loadStaticAssets } from './static-assets.js';
import { parseTimeRange } from './time-range.js';

export { SESSION_COOKIE } from './session-cookie.js';

export interface DashboardDeps {
  store: MetricsStore;
  alerts: AlertStore;
  /** Dashboard sessions (table dashboard_sessions, migration 0002_dashboard_sessions). */
  sessions: SessionDeps;
  settings: SeriesSettings;
  now: () => number;
  /** Whether ingest is refused for want of disk space (the free-space floor), for the pages' notice. */
  ingestPaused: () => boolean;
}

/** Alerts listed on a page; the API serves more. */
const PAGE_ALERTS = 50;

const HTML = 'text/html; charset=utf-8';
const htmlResponse = (description: string) => ({ description, content: { 'text/html': { schema: Type.String() } } });
const redirectResponse = (description: string) => ({ description, headers: { location: Type.String() }, type: 'null' });
const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ErrorSchema } },
});
const internalError = errorResponse('Unexpected failure; logged, details never sent.');
const busy = {
  description: 'Load shedding (the API\'s expensive-read bounds): a page that reloads itself for a browser, the JSON error otherwise; `Retry-After`.',
  content: { 'text/html': { schema: Type.String() }, 'application/json': { schema: ErrorSchema } },
};
/** Page query parameters; anything unreadable falls back to the default view rather than failing the page. */
const PageQuery = Type.Object({
  range: Type.Optional(Type.String({ maxLength: 16, description: 'Preset ending now: 15m, 1h (default), 6h, 24h, 7d, 30d.' })),
  from: Type.Optional(Type.String({ maxLength: 32, description: 'Fixed range start: epoch ms, or YYYY-MM-DDTHH:MM in UTC.' })),
  to: Type.Optional(Type.String({ maxLength: 32, description: 'Fixed range end, same forms.' })),
  metric: Type.Optional(Type.String({ maxLength: 256, description: 'Host page: a metric whose chart opens first.' })),
  sort: Type.Optional(Type.String({ maxLength: 16, description: 'Host list: name, status, platform, cpu, memory, disk or last.' })),
  dir: Type.Optional(Type.String({ maxLength: 4, description: 'Host list: asc or desc.' })),
  q: Type.Optional(Type.String({ maxLength: 256, description: 'Host list: filter on hostname, host id and platform.' })),
});

/**
 * A preValidation hook of the pages: a page parameter the schema would refuse (repeated, longer than its bound) is
 * dropped, so the page shows its default for it instead of a JSON 400 (a filter typed past its length included).
 */
async function dropUnreadablePageQuery(req: { query: unknown }): Promise<void> {
  const query = req.query as Record<string, unknown>;
  for (const [key, spec] of Object.entries(PageQuery.properties)) {
    const value = query[key];
    const maxLength = (spec as { maxLength?: number }).maxLength ?? Infinity;
    if (value !== undefined && (typeof value !== 'string' || value.length > maxLength)) delete query[key];
  }
}

/**
 * GET / (the dashboard), the sign-in and sign-out forms, and the dashboard's
 * static assets. Registered in their own encapsulated scope, so the cookie and
 * form-body parsers apply to these routes only: the JSON API never reads a
 * cookie or accepts a form.
 */
export async function registerDashboard(app: App, deps: DashboardDeps): Promise<void> {
  const assets = await loadStaticAssets();
  const sessionDeps = deps.sessions;

  await app.register(async (plugin) => {
    await plugin.register(fastifyCookie);
    await plugin.register(fastifyFormbody, { bodyLimit: 4096 });
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();

    scope.get('/', {
      preValidation: dropUnreadablePageQuery,
      schema: {
        querystring: PageQuery,
        tags: ['dashboard'],
        summary: 'Per-tenant dashboard',
        security: BEARER_SECURITY,
        description: 'HTML list of the tenant\'s hosts: status (up / late / down), latest CPU, memory and fullest disk, CPU sparkline over the range, last report. ' +
          'Accepts `Authorization: Bearer <token>` or the session cookie from POST /signin. Without either, a browser ' +
          '(Accept includes text/html) is redirected to /signin; any other client gets 401 JSON.',
        response: {
          200: htmlResponse('The dashboard page.'),
          303: redirectResponse('No credentials, or an expired or revoked session, from a browser: go to /signin.'),
          401: errorResponse('Missing, malformed, unknown or revoked bearer token (or no credentials from a non-browser client).'),
          500: internalError,
        },
      },
    }, async (req, reply) => {
      const who = await authenticate(req, reply, deps.store, sessionDeps);
      if (!who) return reply.redirect('/signin', 303);
      const now = sessionDeps.now();
      const { hosts, counts } = withStatus(await deps.store.latestByHost(who.tenantId), now);
      const pieces = dashboardPieces({
        hosts, counts, now, range: parseTimeRange(req.query, now), list: parseHostListQuery(req.query), tenantName: who.tenantName, session: who.session, ingestPaused: deps.ingestPaused(),
        maxPoints: deps.settings.maxPoints,
      });
      reply.type(HTML).header('cache-control', 'no-store');
      return reply.send(hosts.length > ROWS_PER_PIECE ? Readable.from(yieldingBetween(pieces)) : [...pieces].join(''));
    });

    scope.get('/hosts/:id', {
      preValidation: dropUnreadablePageQuery,
      schema: {
        tags: ['dashboard'],
        summary: 'One host\'s page: charts over the range, every metric, its alerts',
        security: BEARER_SECURITY,
        description: 'Same credentials and redirects as GET /. Query: `range` (15m, 1h, 6h, 24h, 7d, 30d) or `from` and `to` (epoch ms), `metric` (a chart to open first).',
        // No length bound here: an id no report could carry is the store's miss, the documented 404.
        params: Type.Object({ id: Type.String() }),
        querystring: PageQuery,
        response: {
          200: htmlResponse('The host page.'),
          303: redirectResponse('No credentials from a browser: go to /signin.'),
          401: errorResponse('Bad bearer token, or no credentials from a non-browser client.'),
          404: htmlResponse('No such host in this tenant (a page for a browser, JSON otherwise).'),
          500: internalError,
          503: busy,
        },
      },
    }, async (req, reply) => {
      const who = await authenticate(req, reply, deps.store, sessionDeps);
      if (!who) return reply.redirect('/signin', 303);
      const now = sessionDeps.now();
      const hostId = req.params.id;
      const host = withStatus(await deps.store.latestByHost(who.tenantId, hostId), now).hosts[0];
      if (!host) {
        if (!acceptsHtml(req)) throw new AppError('not_found', `no host ${hostId}`);
        return reply.code(404).type(HTML).header('cache-control', 'no-store').send(pageLayout({
          title: 'No such host · Fleet metrics',
          nav: 'hosts',
          // As every page: the account, and why a host may not have appeared (its reports refused for want of disk).
          headerAside: accountAside(who.tenantName, who.session),
          ingestPaused: deps.ingestPaused(),
          body: html`<section class="empty"><h1>No such host</h1><p>This tenant has no host <code>${hostId}</code>. It may have been removed by retention.</p><p><a href="/">Back to the host list</a></p></section>`,
        }).value);
      }
      const range = parseTimeRange(req.query, now);
      const metric = typeof req.query.metric === 'string' && req.query.metric !== '' ? req.query.metric : undefined;
      const release = expensiveSlot(scope, req, reply, who.tenantId);
      if (!release) return reply;
      const parts = hostPageParts({ host, range, metric, now, tenantName: who.tenantName, session: who.session, ingestPaused: deps.ingestPaused(), maxPoints: deps.settings.maxPoints });
      // The table of every metric reads the whole range: streamed after the charts' frame.
      return streamPage(reply, parts, async () => {
        try {
          const [summary, alerts] = await Promise.all([
            readHostSeries(deps.store, who.tenantId, hostId, { from: range.from, to: range.to, points: 1, minmax: true }),
            deps.alerts.list(who.tenantId, { hostId, from: range.from, to: range.to, limit: PAGE_ALERTS }),
          ]);
          return hostPageRest({ host, range, summary, alerts });
        } finally {
          release();
        }
      });
    });

    scope.get('/fleet', {
      preValidation: dropUnreadablePageQuery,
      schema: {
        tags: ['dashboard'],
        summary: 'The tenant\'s fleet page: aggregate charts, top 10 hosts by CPU, memory and disk, alerts',
        security: BEARER_SECURITY,
        description: 'Same credentials and redirects as GET /; same range parameters as /hosts/:id.',
        querystring: PageQuery,
        response: {
          200: htmlResponse('The fleet page.'),
          303: redirectResponse('No credentials from a browser: go to /signin.'),
          401: errorResponse('Bad bearer token, or no credentials from a non-browser client.'),
          500: internalError,
          503: busy,
        },
      },
    }, async (req, reply) => {
      const who = await authenticate(req, reply, deps.store, sessionDeps);
      if (!who) return reply.redirect('/signin', 303);
      const now = sessionDeps.now();
      const range = parseTimeRange(req.query, now);
      const [latest, answerLimit] = await Promise.all([deps.store.latestByHost(who.tenantId), deps.store.aggregatePointsLimit(who.tenantId)]);
      const maxPoints = Math.min(deps.settings.maxPoints, answerLimit);
      const release = expensiveSlot(scope, req, reply, who.tenantId);
      if (!release) return reply;
      const parts = fleetPageParts({ range, now, maxPoints, reportedUntil: reportedUntil(withStatus(latest, now).hosts), tenantName: who.tenantName, session: who.session, ingestPaused: deps.ingestPaused() });
      // The top lists read every host's range (seconds for a month of a large fleet): streamed after the charts' frame.
      return streamPage(reply, parts, async (signal) => {
        try {
          const [top, alerts] = await Promise.all([
            readTopHostsBy(deps.store, who.tenantId, ['cpu.usage', 'memory.percent', FULLEST_DISK], range, 10, { latest, signal }),
            deps.alerts.list(who.tenantId, { from: range.from, to: range.to, limit: PAGE_ALERTS }),
          ]);
          const ranked = (m: string) => top.ranked.get(m)!;
          return fleetPageRest({ range, alerts, hosts: top.hosts, top: { cpu: ranked('cpu.usage'), memory: ranked('memory.percent'), disk: ranked(FULLEST_DISK) } });
        } finally {
          release();
        }
      });
    });

    scope.get('/signin', {
      schema: { tags: ['dashboard'], summary: 'Sign-in form', response: { 200: htmlResponse('A form that posts a tenant token to /signin.') } },
    }, async (_req, reply) => reply.type(HTML).header('cache-control', 'no-store').send(renderSignIn()));

    scope.post('/signin', {
      bodyLimit: 4096,
      schema: {
        tags: ['dashboard'],
        summary: 'Exchange a tenant token for a session cookie',
        description: `Form field \`token\`. On success sets the \`${SESSION_COOKIE}\` cookie (HttpOnly, SameSite=Strict, Path=/, ` +
          'Secure over HTTPS, 12 h) and redirects to /. A post from another origin is refused.',
        consumes: ['application/x-www-form-urlencoded'],
        body: Type.Object({ token: Type.String({ maxLength: 1024 }) }),
        response: {
          303: redirectResponse('Signed in: go to /.'),
          400: errorResponse('No token field, or a body that is not a form.'),
          401: htmlResponse('Unknown or revoked token: the form again, with an error.'),
          403: errorResponse('The form was posted from another origin.'),
          413: errorResponse('The form is larger than 4 KiB.'),
          415: errorResponse('The body is not application/x-www-form-urlencoded (or JSON).'),
          500: internalError,
        },
      },
    }, async (req, reply) => {
      assertSameOrigin(req);
      try {
        const session = await openSession(sessionDeps, req.body.token.trim());
        setSessionCookie(req, reply, session.id, session.expiresAt);
        return reply.redirect('/', 303);
      } catch (e: unknown) {
        if (!isAppError(e) || e.code !== 'unauthorized') throw e;
        req.log.warn('dashboard sign-in with an unknown or revoked token');
        return reply.code(401).type(HTML).header('cache-control', 'no-store')
          .send(renderSignIn({ error: 'That token is not valid. Check that it was copied whole and has not been revoked.' }));
      }
    });

    scope.post('/signout', {
      schema: {
        tags: ['dashboard'],
        summary: 'End the browser session',
        description: 'Deletes the session server-side, clears the cookie and redirects to /signin. Idempotent. A post from another origin is refused.',
        response: { 303: redirectResponse('Signed out: go to /signin.'), 403: errorResponse('The form was posted from another origin.'), 500: internalError },
      },
    }, async (req, reply) => {
      assertSameOrigin(req);
      const id = req.cookies[SESSION_COOKIE];
      if (id !== undefined) await closeSession(sessionDeps, id);
      clearSessionCookie(req, reply);
      return reply.redirect('/signin', 303);
    });

    scope.get('/static/:file', {
      schema: {
        tags: ['dashboard'],
        summary: 'Dashboard stylesheets, scripts (its own and uPlot\'s) and icon',
        params: Type.Object({ file: Type.String({ maxLength: 64 }) }),
        response: {
          200: { description: 'The asset.', content: { 'text/css': { schema: Type.String() }, 'text/javascript': { schema: Type.String() }, 'image/svg+xml': { schema: Type.String() } } },
          304: { description: 'Not modified (If-None-Match matched the ETag).', type: 'null' },
          404: errorResponse('Not one of the dashboard\'s assets (dashboard.css, dashboard.js, uPlot.min.css, uPlot.iife.min.js, favicon.svg).'),
        },
      },
    }, async (req, reply) => {
      const asset = assets.get(req.params.file);
      if (!asset) throw new AppError('not_found', 'no such dashboard asset');
      reply.header('etag', asset.etag).header('cache-control', 'public, max-age=3600');
      if (req.headers['if-none-match'] === asset.etag) return reply.code(304).send(null);
      return reply.type(asset.contentType).send(asset.body);
    });
  });
}

interface Viewer extends SessionTenant {
  /** Through the session cookie (so the page offers sign-out), not a bearer header. */
  session: boolean;
}

/**
 * A bearer header, when present, decides alone: a bad one is a 401 even if a
 * cookie is present, like every other endpoint. Without one, the session
 * cookie is tried. Undefined means "send the browser to sign in"; a request
 * that is not from a browser gets the same 401 as the JSON API.
 */
async function authenticate(req: FastifyRequest, reply: FastifyReply, store: MetricsStore, sessionDeps: SessionDeps): Promise<Viewer | undefined> {
  const header = req.headers.authorization;
  if (header === undefined) {
    const id = req.cookies[SESSION_COOKIE];
    if (id !== undefined) {
      const tenant = await resolveSession(sessionDeps, id);
      if (tenant) return { ...tenant, session: true };
      clearSessionCookie(req, reply);
    }
    if (acceptsHtml(req)) return undefined;
  }
  try {
    return { ...(await tenantFromAuthorization(store, header)), session: false };
  } catch (e: unknown) {
    reply.header('www-authenticate', 'Bearer realm="metrics"');
    throw e;
  }
}

/**
 * A slot of the load-shedding bounds for a page that reads whole ranges (the API's series, aggregate and top lists
 * take theirs the same way), taken once the caller is known. Refused, a browser gets a 503 page that reloads itself;
 * any other client the JSON 503. Undefined when the answer is sent.
 */
function expensiveSlot(app: FastifyInstance, req: FastifyRequest, reply: FastifyReply, tenantId: string): (() => void) | undefined {
  try {
    return app.shedExpensive?.(tenantId) ?? (() => undefined);
  } catch (e: unknown) {
    if (!isAppError(e) || e.code !== 'unavailable' || !acceptsHtml(req)) throw e;
    const seconds = Number(e.extra?.['retry_after'] ?? 1);
    void reply.code(503).type(HTML).header('cache-control', 'no-store').header('retry-after', String(seconds)).send(pageLayout({
      title: 'Busy · Fleet metrics',
      retrySeconds: seconds + 1,
      body: html`<section class="empty"><h1>The server is busy</h1><p>This page reloads itself in a moment.</p></section>`,
    }).value);
    return undefined;
  }
}

function acceptsHtml(req: FastifyRequest): boolean {
  return (req.headers.accept ?? '').toLowerCase().includes('text/html');
}

function assertSameOrigin(req: FastifyRequest): void {
  if (!isSameOriginPost(req.headers, `${req.protocol}://${req.host}`)) throw new AppError('forbidden', 'form posted from another origin');
}

function cookieOptions(req: FastifyRequest) {
  return { httpOnly: true, sameSite: 'strict', path: '/', secure: req.protocol === 'https' } as const;
}

function setSessionCookie(req: FastifyRequest, reply: FastifyReply, id: string, expiresAt: number): void {
  reply.setCookie(SESSION_COOKIE, id, { ...cookieOptions(req), expires: new Date(expiresAt) });
}

function clearSessionCookie(req: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, cookieOptions(req));
}

/** `pieces`, with a turn of the event loop after each: other requests are served between them. */
async function* yieldingBetween(pieces: Iterable<string>): AsyncGenerator<string> {
  for (const piece of pieces) {
    yield piece;
    await nextTurn();
  }
}
