import type { FastifyReply, FastifyRequest } from 'fastify';
import { parseBearer } from '../../core/auth/tokens.js';
import { AppError } from '../../core/errors.js';
import { bindLogContext } from '../../core/http/log-context.js';
import type { MetricsStore } from '../domain/metrics-store.js';
import { resolveTenant, type ResolvedTenant } from '../domain/tenant-tokens.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by `authenticate`: the tenant the request's credentials resolve to. */
    tenant?: ResolvedTenant;
  }
}

/**
 * The tenant of an `Authorization` header. Throws `unauthorized` when the
 * header is missing, is not `Bearer <token>`, or names an unknown or revoked
 * token; the three say which in `details` (the token is never echoed).
 */
export async function tenantFromAuthorization(store: MetricsStore, header: string | undefined): Promise<ResolvedTenant> {
  if (!header) throw new AppError('unauthorized', 'missing Authorization: Bearer <token> header');
  const token = parseBearer(header);
  // A well-formed header whose token could never have been issued (too short, odd characters) is a wrong token, not a malformed header.
  if (!token && /^Bearer[ ]+\S+\s*$/i.test(header)) throw new AppError('unauthorized', 'unknown or revoked token');
  if (!token) throw new AppError('unauthorized', 'malformed Authorization header; expected Bearer <token>');
  const tenant = await resolveTenant(store, token);
  if (!tenant) throw new AppError('unauthorized', 'unknown or revoked token');
  return tenant;
}

/** Resolves a request's dashboard session cookie to its tenant (src/metrics/dashboard/session-cookie.ts). */
export type SessionReader = (request: FastifyRequest) => Promise<ResolvedTenant | undefined>;

/**
 * Hook for every data endpoint (usable as onRequest or preHandler): resolves
 * the bearer token to `request.tenant` (its answer then says `Cache-Control: no-store`), or answers 401 with
 * `WWW-Authenticate: Bearer` (RFC 6750). With `readSession`, a GET without an
 * Authorization header may use the dashboard's session cookie instead, so a
 * signed-in page can read the API; writes stay bearer-only.
 */
export function authenticate(store: MetricsStore, readSession?: SessionReader) {
  return async function authenticateBearer(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    try {
      const session = readSession && request.method === 'GET' && request.headers.authorization === undefined
        ? await readSession(request)
        : undefined;
      request.tenant = session ?? await tenantFromAuthorization(store, request.headers.authorization);
      bindLogContext(request, reply, { tenant: request.tenant.tenantId });
      // A tenant's data is never kept by a browser or a proxy: the dashboard reads it with its session cookie, and a
      // shared machine's disk cache would keep hosts, metrics and alerts after sign-out (the pages are no-store too).
      reply.header('cache-control', 'no-store');
    } catch (e: unknown) {
      reply.header('www-authenticate', 'Bearer realm="metrics"');
      throw e;
    }
  };
}

/** The tenant `authenticate` resolved; a route without the hook is a programming error, not a client one. */
export function requestTenant(request: FastifyRequest): ResolvedTenant {
  if (!request.tenant) throw new Error(`route ${request.routeOptions.url ?? request.url} ran without authentication`);
  return request.tenant;
}
