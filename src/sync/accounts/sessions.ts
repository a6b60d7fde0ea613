import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import { generateToken, hashToken } from '../../core/auth/tokens.js';
import type { AccountsContext } from './accounts-context.js';

/**
 * Token prefixes tell a leaked token's kind at a glance (and let secret
 * scanners match them): user access, business access, refresh.
 */
export const TOKEN_PREFIX = { user: 'syu', business: 'syb', refresh: 'syr' } as const;

export interface SessionTokens {
  token: string;
  refreshToken: string;
  /** Expiry of `token`, epoch milliseconds. */
  expiresAt: number;
}

function newPair(ctx: AccountsContext) {
  const now = ctx.now();
  const token = generateToken(TOKEN_PREFIX.user);
  const refreshToken = generateToken(TOKEN_PREFIX.refresh);
  return {
    tokens: { token, refreshToken, expiresAt: now + ctx.config.accessTokenTtlSeconds * 1000 },
    issue: {
      accessHash: hashToken(token),
      accessExpiresAt: now + ctx.config.accessTokenTtlSeconds * 1000,
      refreshHash: hashToken(refreshToken),
      refreshExpiresAt: now + ctx.config.refreshTokenTtlSeconds * 1000,
      // For a new session, its absolute end; a refreshed session keeps the end its login set.
      sessionExpiresAt: now + ctx.config.sessionMaxAgeSeconds * 1000,
      now,
    },
  };
}

/** Starts a new refresh family for the user (register, login) and returns its first token pair. */
export async function startSession(ctx: AccountsContext, userId: string): Promise<SessionTokens> {
  const { tokens, issue } = newPair(ctx);
  await ctx.accounts.issueSession({ ...issue, userId, familyId: randomUUID() });
  return tokens;
}

/**
 * Exchanges a refresh token for a new pair (rotation on every use). Presenting
 * a token that was already exchanged revokes its whole family: either the
 * client or a thief holds a copy, and the server cannot tell which.
 * `onRevoked` is told whose family it was (the feed closes its connections).
 */
export async function refreshSession(ctx: AccountsContext, refreshToken: string, onRevoked: (userId: string) => Promise<void>): Promise<SessionTokens> {
  const { tokens, issue } = newPair(ctx);
  const r = await ctx.accounts.rotateRefreshToken(hashToken(refreshToken), issue);
  if (r.outcome === 'rotated') return tokens;
  if (r.outcome === 'reused') {
    await onRevoked(r.userId);
    throw new AppError('unauthorized', 'this refresh token was already used; every token of its session has been revoked, sign in again');
  }
  throw new AppError('unauthorized', 'the refresh token is invalid, expired or revoked, or its session reached its maximum age; sign in again');
}

/** Revokes the session (refresh family) the caller's token belongs to: its refresh token and every access token issued from it. */
export async function endSession(ctx: AccountsContext, userId: string, familyId: string): Promise<void> {
  await ctx.accounts.revokeFamily(userId, familyId);
}
