import type { ChangeNotifier } from '../feed/change-events.js';
import type { ChangeStore, PullPage } from './change-store.js';
import type { Conflict, ConflictFilter, PushResult, Resolution, SyncStatus } from './change-schemas.js';
import { CONFLICT_PAGE, DEFAULT_BRANCH } from './change-limits.js';
import { assertBranch, validatePushItems } from './push-validation.js';

export interface ChangeDeps {
  changes: ChangeStore;
  notifier: ChangeNotifier;
  /** Epoch milliseconds. */
  now: () => number;
  /** Pull page size when the client gives no limit, and the cap on `limit`. */
  pullPage: { default: number; max: number; bytes: number };
}

export interface PushInput {
  /** The caller: the push is applied only while they are a member (ChangeStore.applyPush). */
  userId: string;
  instanceId: string;
  branch: string | undefined;
  changes: readonly unknown[];
  tombstones: readonly unknown[];
}

/**
 * Validates each item, applies the valid ones in one transaction, then
 * notifies feed subscribers of what was applied. Invalid items are counted in
 * `rejected` with a reason; they never fail the whole push.
 */
export async function pushChanges(deps: ChangeDeps, businessId: string, input: PushInput): Promise<PushResult> {
  assertBranch(input.branch);
  const { items, rejections } = validatePushItems(input.changes, input.tombstones);
  const result = await deps.changes.applyPush(businessId, { userId: input.userId, instanceId: input.instanceId, branch: input.branch ?? DEFAULT_BRANCH, items }, deps.now());
  await deps.notifier.notify(businessId, result.applied);
  const allRejections = [...rejections, ...result.rejections];
  return {
    accepted: result.accepted,
    rejected: allRejections.length,
    server_version: result.serverVersion,
    conflicts: result.conflicts,
    rejections: allRejections,
  };
}

/** One pull page (see ChangeStore.pull); the changes keep their data as stored JSON text (`pullResultJson` writes the answer). */
export async function pullChanges(deps: ChangeDeps, businessId: string, sinceVersion: number, limit: number | undefined): Promise<PullPage> {
  // A limit above the cap is reduced to it, as documented, rather than refused.
  return deps.changes.pull(businessId, sinceVersion, Math.min(limit ?? deps.pullPage.default, deps.pullPage.max), deps.pullPage.bytes);
}

export async function syncStatus(deps: ChangeDeps, businessId: string): Promise<SyncStatus> {
  const s = await deps.changes.status(businessId);
  return { business_id: businessId, server_version: s.serverVersion, pending_conflicts: s.pendingConflicts };
}

export async function listConflicts(
  deps: ChangeDeps,
  businessId: string,
  query: { status?: ConflictFilter; after_id?: number; limit?: number },
): Promise<Conflict[]> {
  return deps.changes.listConflicts(businessId, query.status ?? 'pending', query.after_id ?? 0, Math.min(query.limit ?? CONFLICT_PAGE.default, CONFLICT_PAGE.max));
}

/**
 * Resolves a pending conflict for `userId`, who must still be a member when it is stored; a `local` resolution is a
 * new applied change, so subscribers hear of it.
 */
export async function resolveConflict(deps: ChangeDeps, businessId: string, userId: string, conflictId: number, resolution: Resolution): Promise<Conflict> {
  const { conflict, applied } = await deps.changes.resolveConflict(businessId, conflictId, resolution, deps.now(), userId);
  if (applied) await deps.notifier.notify(businessId, [applied]);
  return conflict;
}
