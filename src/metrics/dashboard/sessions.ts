import { randomBytes } from 'node:crypto';
import { hashToken } from '../../core/auth/tokens.js';
import { AppError } from '../../core/errors.js';
import type { MetricsStore } from '../domain/metrics-store.js';
import type { SessionStore } from './session-store.js';

/**
 * Dashboard sessions let a browser, which cannot type a bearer header, use a
 * tenant token once at sign-in. The cookie carries 256 random bits; the
 * database holds only their SHA-256, so a leaked table opens no session.
 * A session is bound to the token that opened it and is checked against the
 * token table on every request: revoking the token ends its sessions at once.
 */
export const SESSION_TTL_MS = 12 * 60 * 60_000;

/** base64url of 32 random bytes; anything else cannot be a session id and is not looked up. */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

export interface SessionDeps {
  sessions: SessionStore;
  tokens: Pick<MetricsStore, 'findActiveToken'>;
  now: () => number;
}

export interface SessionTenant {
  tenantId: string;
  tenantName: string;
  /** The token the session was opened with (it is checked on every request). */
  tokenId: string;
}

/** Exchanges a tenant token for a new session id; `unauthorized` when the token is unknown or revoked. */
export async function openSession(deps: SessionDeps, token: string): Promise<{ id: string; expiresAt: number } & SessionTenant> {
  const tokenHash = hashToken(token);
  const active = await deps.tokens.findActiveToken(tokenHash);
  if (!active) throw new AppError('unauthorized', 'unknown or revoked token');
  const now = deps.now();
  const id = randomBytes(32).toString('base64url');
  const expiresAt = now + SESSION_TTL_MS;
  await deps.sessions.insert({ idHash: hashToken(id), tokenHash, createdAt: now, expiresAt });
  return { id, expiresAt, tenantId: active.tenantId, tenantName: active.tenantName, tokenId: active.tokenId };
}

/** The tenant of a live session; undefined (and the row removed) when it expired or its token was revoked. */
export async function resolveSession(deps: SessionDeps, id: string): Promise<SessionTenant | undefined> {
  if (!SESSION_ID.test(id)) return undefined;
  const session = await deps.sessions.find(hashToken(id));
  if (!session) return undefined;
  const active = session.expiresAt > deps.now() ? await deps.tokens.findActiveToken(session.tokenHash) : undefined;
  if (!active) {
    await deps.sessions.delete(session.idHash);
    return undefined;
  }
  return { tenantId: active.tenantId, tenantName: active.tenantName, tokenId: active.tokenId };
}

/** Ends a session; unknown ids are ignored so sign-out is idempotent. */
export async function closeSession(deps: SessionDeps, id: string): Promise<void> {
  if (SESSION_ID.test(id)) await deps.sessions.delete(hashToken(id));
}
