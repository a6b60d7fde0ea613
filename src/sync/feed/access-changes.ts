// Why: when a user's tokens are revoked, their feed connections of every business they belong to are re-checked at once.
import type { PubSub } from '../../core/pubsub/pubsub.js';
import type { BusinessStore } from '../businesses/business-store.js';
import { announceAccessChange, withAccessChange, type WarnLogger } from './change-events.js';

/**
 * Announces an access change in each business of `userId` (announceAccessChange): after a refresh token's reuse
 * revoked a session (found only as it is revoked), the feed connections opened with its tokens are closed now rather
 * than at the next heartbeat. Never throws: the heartbeat still closes them.
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

/**
 * Commits `change` (one that revokes some of `userId`'s tokens, as a logout does) between a hold and its release in
 * each business of the user (withAccessChange), so the feed connections opened with those tokens get no change
 * committed after it. If the businesses cannot be listed, the change goes ahead unannounced (logged): the heartbeat
 * still closes the connections.
 */
export async function withUserAccessChange<T>(deps: { pubsub: PubSub; businesses: BusinessStore }, log: WarnLogger, userId: string, change: () => Promise<T>): Promise<T> {
  let businesses: Array<{ id: string }>;
  try {
    businesses = await deps.businesses.listBusinessesOf(userId);
  } catch (e: unknown) {
    log.warn({ err: e, userId }, 'access change not announced; feed connections are re-checked at the next heartbeat');
    return change();
  }
  return withAccessChange(deps.pubsub, log, businesses.map((b) => b.id), change);
}
