import type { Conflict, Operation, Rejection } from './change-schemas.js';
import type { PushItem } from './push-validation.js';

/** What the server holds for one record: its latest applied change. `data` is null once deleted. */
export interface RecordState {
  tableName: string;
  recordUuid: string;
  recordVersion: number;
  serverVersion: number;
  instanceId: string;
  data: string | null;
}

/** A change this instance already pushed and the server applied (for retry detection). */
export interface PriorChange {
  operation: Operation;
  data: string | null;
}

/** The server state a push is decided against, read inside the push transaction. */
export interface PushState {
  serverVersion: number;
  /** Current records touched by the push, by `recordKey`. */
  records: ReadonlyMap<string, RecordState>;
  /** Changes this instance pushed before for those records, by `attemptKey`. */
  ownChanges: ReadonlyMap<string, PriorChange>;
  /** Conflicts this instance's pushes created before for those records, by `attemptKey`, oldest first (one version may have several: different content each). */
  ownConflicts: ReadonlyMap<string, readonly Conflict[]>;
}

export interface PlannedChange {
  serverVersion: number;
  /** Server version of the record's previous change; null for its first. */
  prevVersion: number | null;
  tableName: string;
  recordUuid: string;
  operation: Operation;
  data: string | null;
  recordVersion: number;
}

/** A conflict of the push: an existing one (a retried push) or a new one to store. */
export type PlannedConflict = { existing: Conflict } | { item: PushItem; remote: RecordState };

export interface PushPlan {
  changes: PlannedChange[];
  /** Final state of every record the push changed, to be written back. */
  records: RecordState[];
  conflicts: PlannedConflict[];
  accepted: number;
  rejections: Rejection[];
  serverVersion: number;
}

export function recordKey(tableName: string, recordUuid: string): string {
  return `${tableName}\u0000${recordUuid}`;
}

export function attemptKey(tableName: string, recordUuid: string, version: number): string {
  return `${tableName}\u0000${recordUuid}\u0000${version}`;
}

/**
 * The version rule, as a pure function of the current state. Items are taken
 * in order, each seeing the effect of the ones before it:
 *
 * 1. This instance already pushed this record version with the same operation
 *    and data: a retry. Accepted, nothing new is written.
 *    Same record version with different content: rejected.
 * 2. The record is unknown, or the pushed version is greater than the
 *    server's: applied with the business's next server version.
 * 3. Otherwise, when the server's version came from another instance: a
 *    pending conflict (local = pushed, remote = server data), not applied.
 *    A retry of a push that conflicted returns that conflict again, whoever
 *    wrote the record since (this instance's later items, a `local` resolution).
 * 4. Otherwise (an older version from the same instance, not a retry):
 *    rejected as stale.
 */
export function planPush(state: PushState, instanceId: string, items: readonly PushItem[]): PushPlan {
  const records = new Map(state.records);
  const ownChanges = new Map(state.ownChanges);
  const conflictSlots = new Map<string, PlannedConflict>();
  const touched = new Set<string>();
  const plan: PushPlan = { changes: [], records: [], conflicts: [], accepted: 0, rejections: [], serverVersion: state.serverVersion };

  for (const item of items) {
    const rKey = recordKey(item.tableName, item.recordUuid);
    const aKey = attemptKey(item.tableName, item.recordUuid, item.version);
    const current = records.get(rKey);
    const prior = ownChanges.get(aKey);
    if (prior) {
      if (prior.operation === item.operation && prior.data === item.data) plan.accepted++;
      else plan.rejections.push(reject(item, `version ${item.version} of this record was already pushed by this instance with different content`));
      continue;
    }
    if (!current || item.version > current.recordVersion) {
      const serverVersion = ++plan.serverVersion;
      plan.changes.push({ serverVersion, prevVersion: current?.serverVersion ?? null, tableName: item.tableName, recordUuid: item.recordUuid, operation: item.operation, data: item.data, recordVersion: item.version });
      records.set(rKey, { tableName: item.tableName, recordUuid: item.recordUuid, recordVersion: item.version, serverVersion, instanceId, data: item.data });
      ownChanges.set(aKey, { operation: item.operation, data: item.data });
      touched.add(rKey);
      plan.accepted++;
      continue;
    }
    // The same item again in this push, after it conflicted: that conflict answers it, whoever wrote the record since
    // (a later item of this push), as a retry of the push would be answered.
    const seen = conflictSlots.get(aKey);
    if (seen && sameAttempt(seen, item)) continue;
    const previous = state.ownConflicts.get(aKey)?.find((c) => c.operation === item.operation && c.local_data === localData(item));
    if (previous || current.instanceId !== instanceId) {
      const slot: PlannedConflict = previous ? { existing: previous } : { item, remote: current };
      conflictSlots.set(aKey, slot);
      plan.conflicts.push(slot);
      continue;
    }
    plan.rejections.push(reject(item, `stale version: the server has version ${current.recordVersion} of this record from this instance`));
  }
  plan.records = [...touched].map((k) => records.get(k)!);
  return plan;
}

/** JSON text of what the device wanted the record to be; `null` for a delete. */
export function localData(item: Pick<PushItem, 'data'>): string {
  return item.data ?? 'null';
}

function sameAttempt(slot: PlannedConflict, item: PushItem): boolean {
  if ('existing' in slot) return slot.existing.operation === item.operation && slot.existing.local_data === localData(item);
  return slot.item.operation === item.operation && slot.item.data === item.data;
}

function reject(item: PushItem, reason: string): Rejection {
  return { kind: item.kind, index: item.index, table_name: item.tableName, record_uuid: item.recordUuid, reason };
}
