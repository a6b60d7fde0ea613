import { Type } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import type { SyncDeps } from '../deps.js';
import { loginUser, registerUser, type SignedIn } from '../accounts/register-and-login.js';
import { endSession, refreshSession } from '../accounts/sessions.js';
import { announceUserAccessChange, withUserAccessChange } from '../feed/access-changes.js';
import { issueBusinessToken } from '../accounts/business-token.js';
import { EMAIL_MAX_LENGTH } from '../accounts/email.js';
import { PASSWORD_MAX_LENGTH } from '../accounts/password-policy.js';
import { requireUser } from './auth-guard.js';
import { limitIp, type LimitedRequest } from './rate-limit.js';
import { BearerSecurity, errors, isoTime, Timestamp, UserBody, Uuid } from './schemas.js';
import { normalizeUuid } from '../../core/uuid.js';

// Generous outer bounds only; the real rules (format, policy) give precise messages in the domain.
const Email = Type.String({ maxLength: EMAIL_MAX_LENGTH * 2, description: 'E-mail address (case-insensitive)' });
const Password = Type.String({ maxLength: PASSWORD_MAX_LENGTH * 4, description: 'Password (policy: docs/sync-api.md)' });

/**
 * Seconds from the answer to the token's expiry, as OAuth 2.0's `expires_in`: a client whose clock differs from the
 * server's judges expiry by its own clock from when it asked, which `expires_at` alone cannot give it.
 */
const ExpiresIn = Type.Integer({ minimum: 0, description: 'Seconds the access token stays valid from this answer (OAuth 2.0 expires_in); judge expiry on the client\'s own clock with it' });

/** Register and login answers; exported for the client library (src/client), typed from the same schemas. */
export const SessionBody = Type.Object({
  token: Type.String({ description: 'User access token' }),
  refresh_token: Type.String(),
  expires_at: Timestamp,
  expires_in: ExpiresIn,
  user: UserBody,
});

export const RefreshReplyBody = Type.Object({ token: Type.String(), refresh_token: Type.String(), expires_at: Timestamp, expires_in: ExpiresIn });
export const BusinessTokenBody = Type.Object({ token: Type.String(), expires_at: Timestamp, expires_in: ExpiresIn, business_id: Uuid });

/** `expires_at` and `expires_in` of a token expiring at `expiresAt` (epoch ms), by the service clock. */
function expiry(deps: SyncDeps, expiresAt: number): { expires_at: string; expires_in: number } {
  return { expires_at: isoTime(expiresAt), expires_in: Math.max(0, Math.round((expiresAt - deps.now()) / 1000)) };
}

function sessionReply(deps: SyncDeps, s: SignedIn) {
  return {
    token: s.session.token,
    refresh_token: s.session.refreshToken,
    ...expiry(deps, s.session.expiresAt),
    user: { id: s.user.id, email: s.user.email, name: s.user.name },
  };
}

/** Register, login, refresh, business tokens and logout. */
export function registerAuthRoutes(app: App, deps: SyncDeps): void {
  // Unauthenticated endpoints count against the per-IP limit before anything else, even a malformed body.
  const perIp = async (req: LimitedRequest) => limitIp(deps, req);

  app.post('/api/auth/register', {
    onRequest: perIp,
    schema: {
      tags: ['auth'], summary: 'Create an account and sign in',
      body: Type.Object({ email: Email, name: Type.String({ maxLength: 1000 }), password: Password }, { additionalProperties: false }),
      response: { 201: SessionBody, ...errors(400, 409, 413, 415, 503) },
    },
  }, async (req, reply) => {
    const s = await registerUser(deps, req.body);
    return reply.code(201).send(sessionReply(deps, s));
  });

  app.post('/api/auth/login', {
    onRequest: perIp,
    schema: {
      tags: ['auth'], summary: 'Sign in with e-mail and password',
      body: Type.Object({ email: Email, password: Password }, { additionalProperties: false }),
      response: { 200: SessionBody, ...errors(400, 401, 413, 415, 503) },
    },
  }, async (req) => sessionReply(deps, await loginUser(deps, req.body)));

  app.post('/api/auth/refresh', {
    onRequest: perIp,
    schema: {
      tags: ['auth'], summary: 'Exchange a refresh token for a new token pair (rotation)',
      body: Type.Object({ refresh_token: Type.String({ minLength: 1, maxLength: 512 }) }, { additionalProperties: false }),
      response: { 200: RefreshReplyBody, ...errors(400, 401, 413, 415) },
    },
  }, async (req) => {
    const s = await refreshSession(deps, req.body.refresh_token, (userId) => announceUserAccessChange(deps, req.log, userId));
    return { token: s.token, refresh_token: s.refreshToken, ...expiry(deps, s.expiresAt) };
  });

  app.post('/api/auth/token', {
    onRequest: requireUser(deps, { tokenKinds: ['user'] }),
    schema: {
      tags: ['auth'], summary: 'Get a business-scoped access token (members only)', security: BearerSecurity,
      body: Type.Object({ business_id: Uuid }, { additionalProperties: false }),
      response: { 200: BusinessTokenBody, ...errors(400, 401, 403, 404, 413, 415) },
    },
  }, async (req) => {
    const businessId = normalizeUuid(req.body.business_id);
    if (!businessId) throw new AppError('invalid_request', 'business_id: must be a UUID');
    const t = await issueBusinessToken(deps, req.caller, businessId);
    return { token: t.token, ...expiry(deps, t.expiresAt), business_id: businessId };
  });

  app.post('/api/auth/logout', {
    onRequest: requireUser(deps, { tokenKinds: ['user'] }),
    schema: {
      tags: ['auth'], summary: 'End the session: revoke its refresh token and every access token issued from it', security: BearerSecurity,
      response: { 204: Type.Null({ description: 'Signed out' }), ...errors(401, 403) },
    },
  }, async (req, reply) => {
    const familyId = req.caller.familyId;
    if (familyId) {
      // The session's feed connections, on every instance, are closed now rather than at the next heartbeat, before
      // any change committed after the logout reaches them.
      await withUserAccessChange(deps, req.log, req.caller.userId, () => endSession(deps, req.caller.userId, familyId));
    }
    return reply.code(204).send(null);
  });
}
