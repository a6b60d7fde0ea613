// Why: when a user's tokens are revoked, their feed connections of every business they belong to are re-checked at once.
import type { PubSub } from '../../core/pubsub/pubsub.js';
import type { BusinessStore } from '../businesses/business-store.js';
import { announceAccessChange, withAccessChange, type WarnLogger } from './change-events.js';

/** The businesses of `userId`, or undefined (logged) when they cannot be listed: the heartbeat still re-checks. */
async function businessesOf(deps: { businesses: BusinessStore }, log: WarnLogger, userId: string): Promise<string[] | undefined> {
  try {
    return (await deps.businesses.listBusinessesOf(userId)).map((b) => b.id);
  } catch (e: unknown) {
    log.warn({ err: e, userId }, 'access change not announced; feed connections are re-checked at the next heartbeat');
    return undefined;
  }
}

/**
 * Announces an access change in each business of `userId` (announceAccessChange): after a refresh token's reuse
 * revoked a session (found only as it is revoked), the feed connections opened with its tokens are closed now rather
 * than at the next heartbeat. Never throws: the heartbeat still closes them.
 */
export async function announceUserAccessChange(deps: { pubsub: PubSub; businesses: BusinessStore }, log: WarnLogger, userId: string): Promise<void> {
  const ids = await businessesOf(deps, log, userId);
  await Promise.all((ids ?? []).map((id) => announceAccessChange(deps.pubsub, log, id)));
}

/**
 * Commits `change` (one that revokes some of `userId`'s tokens, as a logout does) between a hold and its release in
 * each business of the user (withAccessChange), so the feed connections opened with those tokens get no change
 * committed after it. If the businesses cannot be listed, the change goes ahead unannounced (logged): the heartbeat
 * still closes the connections.
 */
export async function withUserAccessChange<T>(deps: { pubsub: PubSub; businesses: BusinessStore }, log: WarnLogger, userId: string, change: () => Promise<T>): Promise<T> {
  return withAccessChange(deps.pubsub, log, (await businessesOf(deps, log, userId)) ?? [], change);
}
