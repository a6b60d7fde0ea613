import websocket from '@fastify/websocket';
import { Type, type Static } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import { hashToken, parseBearer } from '../../core/auth/tokens.js';
import { closeSocketsGoingAway } from '../../core/http/going-away.js';
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

/**
 * `GET /ws/sync?business_id=&user_id=`: the change feed. The upgrade is
 * authorised before it happens (a preHandler on the route), so a refused
 * client gets a plain HTTP 400/401/403 and never a WebSocket. Every
 * subscriber of the business then gets one JSON message per applied change.
 */
export function registerFeedRoutes(app: App, deps: SyncDeps, options: FeedOptions = FEED_DEFAULTS): void {
  void app.register(async (scope) => {
    await scope.register(websocket, { preClose: closeSocketsGoingAway, options: { maxPayload: MAX_CLIENT_PAYLOAD } });
    const hub = createFeedHub(deps.pubsub, options, scope.log, (businessId, credentials: readonly FeedCredential[]) => reauthorizeFeed(deps, businessId, credentials));
    scope.addHook('onClose', async () => hub.close());

    scope.get('/ws/sync', {
      websocket: true,
      schema: { querystring: FeedQuery },
      preHandler: async (req) => {
        const query = req.query as Static<typeof FeedQuery>;
        const token = requestToken(req.headers.authorization, query);
        const caller = token ? await authenticateAccessToken(deps, token) : undefined;
        if (!caller) {
          await limitIp(deps, req);
          throw new AppError('unauthorized', 'a valid access token is required (Authorization: Bearer, or the token query parameter)');
        }
        await limitUser(deps, req, caller.userId);
        const businessId = query.business_id.toLowerCase();
        if (caller.userId !== query.user_id.toLowerCase()) throw new AppError('forbidden', 'user_id is not the user of the token');
        if (caller.businessId !== undefined && caller.businessId !== businessId) throw new AppError('forbidden', 'the business token is for another business');
        if (!(await isMember(deps, caller.userId, businessId))) throw new AppError('forbidden', 'you are not a member of this business');
      },
    }, async (socket, req) => {
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
    });
  });
}

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

function requestToken(authorization: string | undefined, query: Static<typeof FeedQuery>): string | undefined {
  return parseBearer(authorization) ?? (query.token === undefined ? undefined : parseBearer(`Bearer ${query.token}`));
}
