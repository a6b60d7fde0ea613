import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../../core/errors.js';
import { bindLogContext } from '../../core/http/log-context.js';
import { hashToken, parseBearer } from '../../core/auth/tokens.js';
import type { SyncDeps } from '../deps.js';
import { limitIp, limitUser } from './rate-limit.js';
import { normalizeUuid } from '../../core/uuid.js';

export type TokenKind = 'user' | 'business';

/** Who is calling, as established by `requireUser`. */
export interface Caller {
  userId: string;
  /** `user` tokens come from register/login/refresh; `business` tokens from POST /api/auth/token and carry `businessId`. */
  tokenKind: TokenKind;
  businessId: string | undefined;
  /** The refresh family the token descends from; business tokens inherit it from the user token that requested them. */
  familyId: string | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the `requireUser` onRequest hook; only routes that use it may read it. */
    caller: Caller;
  }
}

/** Resolves a bearer token to its caller; undefined when unknown, expired or revoked. Also used by the WebSocket upgrade. */
export async function authenticateAccessToken(deps: SyncDeps, token: string): Promise<Caller | undefined> {
  const grant = await deps.accounts.findAccessGrant(hashToken(token), deps.now());
  if (!grant) return undefined;
  return { userId: grant.userId, tokenKind: grant.businessId ? 'business' : 'user', businessId: grant.businessId, familyId: grant.familyId };
}

export interface RequireUserOptions {
  /** Token kinds the route accepts (default both); another kind gets 403. */
  tokenKinds?: readonly TokenKind[];
}

/**
 * onRequest hook for every authenticated route: it runs before the body is
 * read or anything is validated, so a caller without a valid access token gets
 * 401 and never a 400, 404, 413 or 415 that would tell them about the route or
 * cost the server a body. The failure counts against the per-IP limit, so
 * tokens cannot be guessed at leisure. Then the per-user rate limit (429),
 * then the token-kind check (403).
 */
export function requireUser(deps: SyncDeps, options: RequireUserOptions = {}): onRequestAsyncHookHandler {
  const kinds = options.tokenKinds ?? ['user', 'business'];
  return async (req, reply) => {
    const token = parseBearer(req.headers.authorization);
    const caller = token ? await authenticateAccessToken(deps, token) : undefined;
    if (!caller) {
      await limitIp(deps, req);
      throw new AppError('unauthorized', token ? 'the access token is invalid, expired or revoked' : 'an Authorization: Bearer <token> header is required');
    }
    await limitUser(deps, req, caller.userId);
    if (!kinds.includes(caller.tokenKind)) {
      throw new AppError('forbidden', `this endpoint needs a ${kinds.join(' or ')} token, not a ${caller.tokenKind} token`);
    }
    req.caller = caller;
    // Later log lines of this request name the user and the business asked for (not yet checked: that is resolveBusiness's job).
    const asked = typeof req.headers['x-business-id'] === 'string' ? normalizeUuid(req.headers['x-business-id'].trim()) : undefined;
    const business = caller.businessId ?? asked;
    bindLogContext(req, reply, business ? { user: caller.userId, business } : { user: caller.userId });
  };
}

export async function isMember(deps: SyncDeps, userId: string, businessId: string): Promise<boolean> {
  return (await deps.businesses.roleOf(businessId, userId)) !== undefined;
}

/**
 * The business a business-scoped request acts on: the `X-Business-ID` header or
 * the business of a business-scoped token (both when they agree). 400 when
 * neither names one, when it is not a UUID, or when header, token and
 * `bodyBusinessId` disagree; 404 for an unknown business; 403 when the caller
 * is not (or no longer) a member; membership is read on every request.
 */
export async function resolveBusiness(req: FastifyRequest, deps: SyncDeps, bodyBusinessId?: string): Promise<string> {
  const raw = req.headers['x-business-id'];
  if (Array.isArray(raw)) throw new AppError('invalid_request', 'X-Business-ID must be given once');
  let fromHeader: string | undefined;
  if (raw !== undefined) {
    fromHeader = normalizeUuid(raw.trim());
    if (!fromHeader) throw new AppError('invalid_request', 'X-Business-ID must be a UUID');
  }
  const fromToken = req.caller.businessId;
  if (fromHeader && fromToken && fromHeader !== fromToken) {
    throw new AppError('invalid_request', 'X-Business-ID disagrees with the business of the business-scoped token');
  }
  const businessId = fromHeader ?? fromToken;
  if (!businessId) throw new AppError('invalid_request', 'X-Business-ID header is required with a user token');
  if (bodyBusinessId !== undefined && normalizeUuid(bodyBusinessId) !== businessId) {
    throw new AppError('invalid_request', 'business_id in the body disagrees with the business of the request (X-Business-ID or token)');
  }
  const access = await deps.businesses.access(businessId, req.caller.userId);
  if (!access.exists) throw new AppError('not_found', 'no such business');
  if (access.role === undefined) throw new AppError('forbidden', 'you are not a member of this business');
  return businessId;
}

/**
 * Whether the caller may act in `businessId`, found from a resource rather than named by the request: they are a
 * member, and neither their business token nor an X-Business-ID header names another business. A resource of a
 * business they may not act in must answer like a missing one (404), so its existence is not revealed.
 */
export async function mayActIn(req: FastifyRequest, deps: SyncDeps, businessId: string): Promise<boolean> {
  if (req.caller.businessId !== undefined && req.caller.businessId !== businessId) return false;
  const header = req.headers['x-business-id'];
  if (typeof header === 'string' && normalizeUuid(header.trim()) !== businessId) return false;
  return isMember(deps, req.caller.userId, businessId);
}
