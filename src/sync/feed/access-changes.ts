// Why: when a user's tokens are revoked, their feed connections of every business they belong to are re-checked at once.
import type { PubSub } from '../../core/pubsub/pubsub.js';
import type { BusinessStore } from '../businesses/business-store.js';
import { announceAccessChange, type WarnLogger } from './change-events.js';

/**
 * Announces an access change in each business of `userId` (announceAccessChange): after a logout or a refresh token's
 * reuse revoked a session, the feed connections opened with its tokens are closed now rather than at the next
 * heartbeat. Never throws: the heartbeat still closes them.
 */
export async function announceUserAccessChange(deps: { pubsub: PubSub; businesses: BusinessStore }, log: WarnLogger, userId: string): Promise<void> {
  let businesses: Array<{ id: string }>;
  try {
    businesses = await deps.businesses.listBusinessesOf(userId);
  } catch (e: unknown) {
    log.warn({ err: e, userId }, 'access change not announced; feed connections are re-checked at the next heartbeat');
    return;
  }
  await Promise.all(businesses.map((b) => announceAccessChange(deps.pubsub, log, b.id)));
}
