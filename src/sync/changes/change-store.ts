import type { Change, Conflict, ConflictFilter, Rejection, Resolution } from './change-schemas.js';
import type { PushItem } from './push-validation.js';

/** `now` arguments below are epoch milliseconds (the deps clock). */
export interface PushCommand {
  /**
   * The user pushing. The push is applied only if they are a member of the business when its transaction runs
   * (else `forbidden`, and nothing of it is applied): a removal answered before that transaction refuses it, one
   * arriving during it waits for its commit. null skips the check, for callers that are no member's request (tools,
   * store tests).
   */
  userId: string | null;
  instanceId: string;
  branch: string;
  /** Valid, normalised items in push order. */
  items: PushItem[];
}

/** What feed subscribers hear of an applied change: the change as a pull gives it (its data as stored text). */
export type AppliedChange = Omit<StoredChange, 'id' | 'business_id'>;

export interface AppliedPush {
  accepted: number;
  /** Items the version rule rejected (stale, or a record version re-pushed with other content); validation rejections are added by the caller. */
  rejections: Rejection[];
  serverVersion: number;
  /** Conflicts of this push in item order, stored and with their ids. */
  conflicts: Conflict[];
  /** Changes applied by this push, in version order (for notifications). */
  applied: AppliedChange[];
}

/** A change as stored: `data` is its canonical JSON text (null for a delete), carried into a pull answer without parsing it. */
export type StoredChange = Omit<Change, 'data'> & { data: string | null };

export interface PullPage {
  changes: StoredChange[];
  hasMore: boolean;
  /** Last change of the page when `hasMore`, else the business's current server version. */
  version: number;
}

export interface ResolvedConflict {
  conflict: Conflict;
  /** The change a `local` resolution applied (its data as stored text, for the feed); null for `remote` and `skip`. */
  applied: StoredChange | null;
}

/**
 * Storage of record changes, current record states and conflicts, per business.
 *
 * Server versions: each business has one counter. Every applied change takes
 * the next value, strictly increasing, with no gap and no reuse. Writers take
 * the counter row first and hold it until commit, so commit order is version
 * order: once a reader has seen version N, no change below N can appear later.
 */
export interface ChangeStore {
  /**
   * Applies a validated push in ONE transaction under the version rule of
   * `planPush`: applied changes, record states, new conflicts and the counter
   * all commit together or not at all. Durable when it resolves. Throws
   * `forbidden`, using no version, when `push.userId` is no longer a member
   * (see PushCommand); other pushes committed with it are not affected.
   */
  applyPush(businessId: string, push: PushCommand, now: number): Promise<AppliedPush>;

  /**
   * Changes with a server version above `sinceVersion`, in version order, at
   * most `limit`, and no more once their data reach `maxBytes` characters of
   * JSON text (at least one change, whatever its size). Only committed changes
   * up to a consistent server version are returned, so paging until `hasMore`
   * is false sees every change exactly once.
   */
  pull(businessId: string, sinceVersion: number, limit: number, maxBytes?: number): Promise<PullPage>;

  status(businessId: string): Promise<{ serverVersion: number; pendingConflicts: number }>;

  /** Conflicts of the business by ascending id: `pending`, `resolved` (any other resolution) or `all`. */
  listConflicts(businessId: string, filter: ConflictFilter, afterId: number, limit: number): Promise<Conflict[]>;

  /** The business a conflict belongs to (any business); undefined for an unknown id. Callers check membership. */
  conflictBusiness(conflictId: number): Promise<string | undefined>;

  /**
   * Closes a pending conflict of this business. `local` applies the conflict's
   * local data as a new change (next server version, record version one above
   * the server's), in the same transaction; `remote` and `skip` change no record.
   * Throws `not_found` for an unknown id or another business's conflict,
   * `conflict` when it is no longer pending, and `forbidden` when `userId` is
   * not a member of the business in that transaction (checked as a push's
   * `userId`; null skips the check).
   */
  resolveConflict(businessId: string, conflictId: number, resolution: Resolution, now: number, userId: string | null): Promise<ResolvedConflict>;

  /** Finishes the pushes in flight and releases what the store holds besides the database (the SQLite push thread). */
  close(): Promise<void>;
}
