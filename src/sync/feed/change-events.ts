import { randomUUID } from 'node:crypto';
import type { PubSub } from '../../core/pubsub/pubsub.js';
import type { AppliedChange } from '../changes/change-store.js';
import type { Operation } from '../changes/change-schemas.js';

/**
 * The message every feed subscriber of a business gets for each applied change: the specification's five fields, and
 * the rest of the change as a pull gives it, so a client next in line applies it without pulling. `data` is left out
 * of a change whose data is larger than FEED_DATA_MAX characters of JSON: the message is then a hint to pull.
 */
export interface ChangeEvent {
  type: 'change';
  table_name: string;
  record_uuid: string;
  version: number;
  instance_id: string;
  operation: Operation;
  record_version: number;
  created_at: string;
  /** `{}` for a delete, as in a pull. */
  data?: Record<string, unknown>;
}

/**
 * Largest change data a feed message carries. Every subscriber's socket queues the message (a slow one is dropped
 * past 1 MiB), so a burst of large changes goes out as hints and is pulled instead.
 */
export const FEED_DATA_MAX = 8 * 1024;

/**
 * What travels on the pub/sub channel: one message per committed write, its changes in version order, their data
 * as the stored JSON text (each instance's feed writes it into its messages as it is: nothing is parsed on the push
 * path, nor by an instance for its sockets).
 */
export interface ChangeBatch {
  business_id: string;
  events: AppliedChange[];
}

/**
 * What travels on the same channel when who may read the business changed (a member removed, a session ended): every
 * instance re-checks its subscribers of the business at once, holding the business's later batches until it has,
 * instead of waiting for the next heartbeat. `release` names the AccessHold sent before the change was committed.
 */
export interface AccessChange {
  business_id: string;
  recheck: true;
  release?: string;
}

/**
 * Sent before a change of access is committed: every instance holds the business's batches from then on, until the
 * AccessChange that releases it has been checked (or HOLD_MAX_MS has passed), so no batch committed after the change
 * reaches a connection before its re-check. Pub/sub keeps one channel's messages in order, and the change's commit
 * comes after this was published, so every later batch comes after it too.
 */
export interface AccessHold {
  business_id: string;
  hold: string;
}

export function isAccessChange(message: unknown): message is AccessChange {
  return (message as Partial<AccessChange> | null)?.recheck === true;
}

export function isAccessHold(message: unknown): message is AccessHold {
  return typeof (message as Partial<AccessHold> | null)?.hold === 'string';
}

/**
 * Announces an AccessChange of `businessId` to every instance's feed. Never throws: if the message is lost, the
 * next heartbeat's re-check closes the connections all the same (logged).
 */
export async function announceAccessChange(pubsub: PubSub, log: WarnLogger, businessId: string, release?: string): Promise<void> {
  try {
    await pubsub.publish(businessChannel(businessId), { business_id: businessId, recheck: true, ...(release ? { release } : {}) } satisfies AccessChange);
  } catch (e: unknown) {
    log.warn({ err: e, businessId }, 'access change notification failed; feed connections are re-checked at the next heartbeat');
  }
}

/**
 * Commits `change` (one that takes away access to `businessIds`) between an AccessHold and the AccessChange that
 * releases it, so the feed's connections that lost access get no change committed after it. Never throws for pub/sub:
 * a hold that cannot be published is logged, and the change goes ahead (the heartbeat still closes the connections).
 */
export async function withAccessChange<T>(pubsub: PubSub, log: WarnLogger, businessIds: readonly string[], change: () => Promise<T>): Promise<T> {
  const hold = randomUUID();
  await Promise.all(businessIds.map(async (businessId) => {
    try {
      await pubsub.publish(businessChannel(businessId), { business_id: businessId, hold } satisfies AccessHold);
    } catch (e: unknown) {
      log.warn({ err: e, businessId }, 'access hold not announced; feed connections are re-checked after the change and at the next heartbeat');
    }
  }));
  try {
    return await change();
  } finally {
    // Released also when the change failed: the feed re-checks (nothing changed) and sends what it held.
    await Promise.all(businessIds.map((businessId) => announceAccessChange(pubsub, log, businessId, hold)));
  }
}

/** Tells every instance's feed subscribers about committed changes. Never throws: delivery is at-most-once. */
export interface ChangeNotifier {
  notify(businessId: string, changes: readonly AppliedChange[]): Promise<void>;
}

export interface WarnLogger {
  warn(obj: object, msg: string): void;
}

/** One channel per business, so an instance only receives what its subscribers watch. */
export function businessChannel(businessId: string): string {
  return `sync:changes:${businessId}`;
}

/** The ChangeEvent text of an applied change: the stored data text is written in as it is (`{}` for a delete). */
export function feedMessage(change: AppliedChange): string {
  const head = JSON.stringify({
    type: 'change', table_name: change.table_name, record_uuid: change.record_uuid, version: change.version, instance_id: change.instance_id,
    operation: change.operation, record_version: change.record_version, created_at: change.created_at,
  } satisfies Omit<ChangeEvent, 'data'>);
  const data = change.data === null ? '{}' : change.data;
  return typeof data === 'string' && data.length <= FEED_DATA_MAX ? `${head.slice(0, -1)},"data":${data}}` : head;
}

/**
 * Publishes through the core PubSub (in-process, or Redis across instances).
 * A failed publish is logged, not thrown: the change is committed and clients
 * that missed the message catch up with pull.
 */
export function createPubSubNotifier(pubsub: PubSub, log: WarnLogger): ChangeNotifier {
  return {
    async notify(businessId, changes) {
      if (!changes.length) return;
      const batch: ChangeBatch = { business_id: businessId, events: [...changes] };
      try {
        await pubsub.publish(businessChannel(businessId), batch);
      } catch (e: unknown) {
        log.warn({ err: e, businessId }, 'change notification failed; subscribers will catch up by pulling');
      }
    },
  };
}
