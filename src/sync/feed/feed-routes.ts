import websocket from '@fastify/websocket';
import type { Duplex } from 'node:stream';
import { Type, type Static } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import { hashToken, parseBearer } from '../../core/auth/tokens.js';
import { closeSocketsGoingAway, endRefusedHandshake, goingAwayGraceMs } from '../../core/http/going-away.js';
import { SECURITY_HEADERS } from '../../core/http/security-headers.js';
import type { SyncDeps } from '../deps.js';
import { authenticateAccessToken, isMember } from '../http/auth-guard.js';
import { limitIp, limitUser } from '../http/rate-limit.js';
import { UUID_PATTERN } from '../../core/uuid.js';
import { createFeedHub, FEED_DEFAULTS, type FeedOptions } from './feed-hub.js';

const FeedQuery = Type.Object({
  business_id: Type.String({ pattern: UUID_PATTERN }),
  user_id: Type.String({ pattern: UUID_PATTERN }),
  token: Type.Optional(Type.String({ description: 'Access token, for browsers that cannot set Authorization on a WebSocket; redacted from logs.' })),
});

/** Largest message a client may send; the feed is server-to-client, so anything bigger is abuse. */
const MAX_CLIENT_PAYLOAD = 4096;

/** Close code for an upgrade that raced past the per-user cap: 1008 "policy violation" (the HTTP check refuses the rest with 429). */
export const TOO_MANY_FEEDS = 1008;

/** The specification's headers as lines of a raw HTTP answer, made once. */
const SECURITY_HEADER_LINES = Object.entries(SECURITY_HEADERS).map(([name, value]) => `${name}: ${value}`);

/**
 * `GET /ws/sync?business_id=&user_id=`: the change feed. The upgrade is
 * authorised before it happens, so a refused client gets a plain HTTP error
 * and never a WebSocket: the token first (401, before the query is even
 * validated), then the browser Origin (403 unless allow-listed; clients that
 * send none are not browsers and pass), then the query (400), the user and
 * membership (403) and the per-user socket cap (429). Every subscriber of the
 * business then gets one JSON message per applied change.
 */
export function registerFeedRoutes(app: App, deps: SyncDeps, options: FeedOptions = FEED_DEFAULTS): void {
  const allowedOrigins = new Set(deps.config.feedAllowedOrigins.map((o) => o.toLowerCase()));
  const maxPerUser = deps.config.feedMaxSocketsPerUser;
  // Open feed sockets per user on this instance.
  const openByUser = new Map<string, number>();

  void app.register(async (scope) => {
    await scope.register(websocket, { preClose: closeSocketsGoingAway(goingAwayGraceMs(deps.config.shutdownTimeoutMs)), options: { maxPayload: MAX_CLIENT_PAYLOAD } });
    // The 101 answer is written by ws, past Fastify's hooks: the specification's headers go on it here.
    scope.websocketServer.on('headers', (headers: string[]) => { headers.push(...SECURITY_HEADER_LINES); });
    // A handshake ws refuses (no or a malformed Sec-WebSocket-Key, another version or Upgrade) after our checks passed:
    // the JSON error and headers of every other answer, not ws's own text/html 400 without them.
    scope.websocketServer.on('wsClientError', (err: Error, socket: Duplex) => refuseHandshake(socket, err.message));
    scope.addHook('onResponse', endRefusedHandshake);
    const hub = createFeedHub(deps.pubsub, options, scope.log, (businessId, credentials: readonly FeedCredential[]) => reauthorizeFeed(deps, businessId, credentials));
    scope.addHook('onClose', async () => hub.close());

    scope.route({
      method: 'GET',
      url: '/ws/sync',
      schema: { querystring: FeedQuery, hide: true },
      onRequest: async (req) => {
        const token = requestToken(req.headers.authorization, req.query as Partial<Static<typeof FeedQuery>>);
        const caller = token ? await authenticateAccessToken(deps, token) : undefined;
        if (!caller) {
          await limitIp(deps, req);
          throw new AppError('unauthorized', 'a valid access token is required (Authorization: Bearer, or the token query parameter)');
        }
        await limitUser(deps, req, caller.userId);
        // Browsers always send Origin on a WebSocket upgrade and let any page open one: only the service's own pages
        // (same origin, as the example page) and listed origins may.
        const origin = req.headers.origin;
        if (origin !== undefined && !allowedOrigins.has(origin.toLowerCase()) && !sameOrigin(origin, req.host)) {
          throw new AppError('forbidden', 'this Origin may not open the change feed (see --feed-allowed-origins)');
        }
        req.caller = caller;
      },
      preHandler: async (req) => {
        const query = req.query as Static<typeof FeedQuery>;
        const caller = req.caller;
        const businessId = query.business_id.toLowerCase();
        if (caller.userId !== query.user_id.toLowerCase()) throw new AppError('forbidden', 'user_id is not the user of the token');
        if (caller.businessId !== undefined && caller.businessId !== businessId) throw new AppError('forbidden', 'the business token is for another business');
        if (!(await isMember(deps, caller.userId, businessId))) throw new AppError('forbidden', 'you are not a member of this business');
        if ((openByUser.get(caller.userId) ?? 0) >= maxPerUser) {
          throw new AppError('rate_limited', `at most ${maxPerUser} change-feed connections per user; close one first`, { retry_after: FEED_CAP_RETRY_SECONDS });
        }
      },
      // A plain GET that passed every check: a JSON error like any other, not the plugin's empty 404.
      handler: async () => {
        throw new AppError('invalid_request', 'the change feed is a WebSocket: send this request with Upgrade: websocket');
      },
      wsHandler: async (socket, req) => {
        // Counted synchronously on arrival, so upgrades that raced past the HTTP check are closed here.
        const userId = req.caller.userId;
        const open = (openByUser.get(userId) ?? 0) + 1;
        if (open > maxPerUser) {
          socket.close(TOO_MANY_FEEDS, 'too many change-feed connections for this user');
          return;
        }
        openByUser.set(userId, open);
        socket.once('close', () => {
          const left = (openByUser.get(userId) ?? 1) - 1;
          if (left > 0) openByUser.set(userId, left);
          else openByUser.delete(userId);
        });
        // Nothing is expected from the client; a message is ignored rather than answered.
        socket.on('message', () => undefined);
        const query = req.query as Static<typeof FeedQuery>;
        const businessId = query.business_id.toLowerCase();
        const token = requestToken(req.headers.authorization, query)!;
        try {
          await hub.add(businessId, socket, { tokenHash: hashToken(token), userId: query.user_id.toLowerCase() });
          if (socket.readyState !== socket.CLOSED) {
            deps.selfMetrics.feedConnections.inc();
            socket.once('close', () => deps.selfMetrics.feedConnections.dec());
          }
        } catch (e: unknown) {
          req.log.error({ err: e }, 'feed subscription failed');
          socket.close(1011, 'subscription failed');
        }
      },
    });
  });
}

/** Answers a refused handshake on its raw socket as the error handler answers a 400, then closes it. */
function refuseHandshake(socket: Duplex, message: string): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify({ error: 'invalid_request', details: `WebSocket handshake: ${message}` });
  socket.end([
    'HTTP/1.1 400 Bad Request', 'Connection: close', 'Content-Type: application/json; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`,
    ...SECURITY_HEADER_LINES, '', body,
  ].join('\r\n'));
}

/** Whether a browser's Origin is this service's own (scheme aside: TLS may end at a proxy). */
function sameOrigin(origin: string, host: string): boolean {
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}

/** What a client over the per-user cap is told to wait: sockets are long-lived, so about a minute. */
const FEED_CAP_RETRY_SECONDS = 60;

/** What a feed connection authenticated with; only the token's hash is kept. */
interface FeedCredential {
  tokenHash: string;
  userId: string;
}

/**
 * The upgrade's checks again, for every socket of one business in two queries:
 * an expired or revoked token, a business token of another business, or a
 * member removed from the business loses the feed within one heartbeat.
 */
async function reauthorizeFeed(deps: SyncDeps, businessId: string, credentials: readonly FeedCredential[]): Promise<boolean[]> {
  const grants = await deps.accounts.findAccessGrants([...new Set(credentials.map((c) => c.tokenHash))], deps.now());
  const members = await deps.businesses.membersAmong(businessId, [...new Set([...grants.values()].map((g) => g.userId))]);
  return credentials.map((c) => {
    const grant = grants.get(c.tokenHash);
    return grant !== undefined && grant.userId === c.userId && (grant.businessId === undefined || grant.businessId === businessId) && members.has(grant.userId);
  });
}

function requestToken(authorization: string | undefined, query: { token?: unknown }): string | undefined {
  return parseBearer(authorization) ?? (typeof query.token === 'string' ? parseBearer(`Bearer ${query.token}`) : undefined);
}
