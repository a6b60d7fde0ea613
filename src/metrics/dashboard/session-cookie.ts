import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { MetricsStore } from '../domain/metrics-store.js';
import type { SessionReader } from '../http/authenticate.js';
import { createSessionStore, type DashboardSessionTables } from './session-store.js';
import { resolveSession, type SessionDeps } from './sessions.js';

/** The session cookie. HttpOnly and SameSite=Strict always; Secure whenever the request arrived over HTTPS. */
export const SESSION_COOKIE = 'metrics_session';

export function createSessionDeps(db: Kysely<DashboardSessionTables>, store: MetricsStore, now: () => number): SessionDeps {
  return { sessions: createSessionStore(db), tokens: store, now };
}

/** The value of the session cookie in a raw Cookie header (the JSON API does not load the cookie plugin). */
export function sessionIdFromCookieHeader(header: string | undefined): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Lets the signed-in dashboard read the JSON API with its cookie. The cookie
 * is SameSite=Strict, so another site cannot make the browser send it, and
 * the API sends no CORS headers, so another origin cannot read an answer.
 */
export function createSessionReader(deps: SessionDeps): SessionReader {
  return async (request: FastifyRequest) => {
    const id = sessionIdFromCookieHeader(request.headers.cookie);
    return id === undefined ? undefined : resolveSession(deps, id);
  };
}
