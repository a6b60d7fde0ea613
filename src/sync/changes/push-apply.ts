// Why: a group-commit transaction reads and writes each business once, however many pushes it holds; round trips and statements are per group, not per push.
import type { Selectable } from 'kysely';
import type { DialectName } from '../../core/storage/database.js';
import type { Conflict, Operation } from './change-schemas.js';
import type { ChangeTables } from './change-tables.js';
import type { AppliedPush, PushCommand } from './change-store.js';
import { isoTime, toConflict } from './change-rows.js';
import { attemptKey, localData, planPush, recordKey, type PlannedChange, type PriorChange, type RecordState } from './push-plan.js';
import type { PushItem } from './push-validation.js';
import { pushSql } from './push-sql.js';

/**
 * Runs one statement inside the caller's transaction and answers its rows.
 * The applier needs nothing else, so it runs on the service's Kysely
 * connection and on the SQLite push thread's bare better-sqlite3 alike.
 */
export type Exec = <R>(text: string, params: readonly unknown[]) => Promise<R[]>;

/** One push waiting in the group-commit queue, with the service time it arrived at. */
export interface QueuedPush { businessId: string; push: PushCommand; now: number }

/** What became of a queued push: applied, or refused whole because its user is no longer a member of the business. */
export type PushOutcome = AppliedPush | { refused: 'not_member' };

interface PendingChange extends PlannedChange { instanceId: string; createdAt: number }
type ConflictRow = Selectable<ChangeTables['sync_conflicts']>;

/**
 * Applies a group of pushes inside the caller's transaction, in order, each
 * seeing the effect of the ones before it. Per business: the counter is
 * locked, the current records of every pushed item are read in one query, the
 * pushes are planned in memory, and the changes, record states and counter are
 * written together at the end. Only a push with items at or below the server's
 * record version (a retry, a conflict or a stale item) reads history, and the
 * writes planned before it are flushed first so that read sees them.
 *
 * Membership is read again under the counter lock, in one query per business:
 * a push whose user is no longer a member is refused (no version used), the
 * others of the group go on. Membership was checked when the request came, but
 * a removal may have committed since; on PostgreSQL the rows read stay locked,
 * so a removal from now on waits for this commit.
 */
export function createGroupApplier(dialect: DialectName): (exec: Exec, group: readonly QueuedPush[]) => Promise<PushOutcome[]> {
  const hot = pushSql(dialect);
  const pg = dialect === 'postgres';

  async function readRecords(exec: Exec, businessId: string, pushes: readonly QueuedPush[]): Promise<Map<string, RecordState>> {
    const keys = new Map<string, readonly [string, string]>();
    for (const { push } of pushes) for (const i of push.items) keys.set(recordKey(i.tableName, i.recordUuid), [i.tableName, i.recordUuid]);
    const records = new Map<string, RecordState>();
    if (!keys.size) return records;
    const list = [...keys.values()];
    const rows = await exec<{ table_name: string; record_uuid: string; record_version: number; server_version: number; instance_id: string; data: string | null }>(
      hot.recordsByKey, pg ? [businessId, list.map((k) => k[0]), list.map((k) => k[1])] : [businessId, JSON.stringify(list)]);
    for (const r of rows) {
      records.set(recordKey(r.table_name, r.record_uuid), {
        tableName: r.table_name, recordUuid: r.record_uuid, recordVersion: Number(r.record_version), serverVersion: Number(r.server_version), instanceId: r.instance_id, data: r.data,
      });
    }
    return records;
  }

  /** Writes the planned changes, the final record states and the counter. */
  async function write(exec: Exec, businessId: string, changes: PendingChange[], records: Map<string, RecordState>): Promise<void> {
    if (!changes.length) return;
    const counter = changes[changes.length - 1]!.serverVersion;
    const recs = [...records.values()];
    if (pg) {
      await exec(hot.write, [
        businessId,
        changes.map((c) => c.serverVersion), changes.map((c) => c.prevVersion), changes.map((c) => c.tableName), changes.map((c) => c.recordUuid), changes.map((c) => c.operation),
        changes.map((c) => c.data), changes.map((c) => c.recordVersion), changes.map((c) => c.instanceId), changes.map((c) => c.createdAt),
        recs.map((r) => r.tableName), recs.map((r) => r.recordUuid), recs.map((r) => r.recordVersion), recs.map((r) => r.serverVersion), recs.map((r) => r.instanceId), recs.map((r) => r.data),
        counter,
      ]);
    } else {
      await exec(hot.write, [businessId, JSON.stringify(changes.map((c) => [c.serverVersion, c.prevVersion, c.tableName, c.recordUuid, c.operation, c.data, c.recordVersion, c.instanceId, c.createdAt]))]);
      await exec(hot.upsertRecords!, [businessId, JSON.stringify(recs.map((r) => [r.tableName, r.recordUuid, r.recordVersion, r.serverVersion, r.instanceId, r.data]))]);
      await exec(hot.setCounter!, [counter, businessId]);
    }
    changes.length = 0;
    records.clear();
  }

  /** What this instance pushed before for the records its `behind` items name: applied changes and stored conflicts. */
  async function ownHistory(exec: Exec, businessId: string, push: PushCommand, behind: readonly { tableName: string; recordUuid: string; version: number }[], records: ReadonlyMap<string, RecordState>) {
    const ownChanges = new Map<string, PriorChange>();
    const ownConflicts = new Map<string, Conflict[]>();
    const wanted = new Set(behind.map((i) => attemptKey(i.tableName, i.recordUuid, i.version)));
    // One walk per record, from its current change down to the lowest version asked about.
    const floors = new Map<number, number>();
    for (const i of behind) {
      const start = records.get(recordKey(i.tableName, i.recordUuid))!.serverVersion;
      floors.set(start, Math.min(floors.get(start) ?? i.version, i.version));
    }
    const starts = [...floors];
    const prior = await exec<{ table_name: string; record_uuid: string; record_version: number; operation: Operation; data: string | null }>(hot.ownHistory, pg
      ? [businessId, starts.map((s) => s[0]), starts.map((s) => s[1]), push.instanceId]
      : [JSON.stringify(starts), businessId, businessId, push.instanceId]);
    for (const c of prior) {
      const key = attemptKey(c.table_name, c.record_uuid, Number(c.record_version));
      if (wanted.has(key)) ownChanges.set(key, { operation: c.operation, data: c.data });
    }
    const uuids = [...new Set(behind.map((i) => i.recordUuid))];
    const conflicts = await exec<ConflictRow>(hot.ownConflicts, [businessId, push.instanceId, pg ? uuids : JSON.stringify(uuids)]);
    for (const c of conflicts) {
      const key = attemptKey(c.table_name, c.record_uuid, Number(c.version));
      if (!wanted.has(key)) continue;
      const list = ownConflicts.get(key);
      if (list) list.push(toConflict(c));
      else ownConflicts.set(key, [toConflict(c)]);
    }
    return { ownChanges, ownConflicts };
  }

  /** The pushes whose user is a member of the business now (and those that ask for no check). */
  async function byMembers(exec: Exec, businessId: string, pushes: readonly QueuedPush[]): Promise<Set<QueuedPush>> {
    const users = [...new Set(pushes.flatMap((q) => q.push.userId ?? []))];
    const members = new Set<string>();
    if (users.length) {
      const rows = await exec<{ user_id: string }>(hot.members, [businessId, pg ? users : JSON.stringify(users)]);
      for (const r of rows) members.add(r.user_id);
    }
    return new Set(pushes.filter((q) => q.push.userId === null || members.has(q.push.userId)));
  }

  async function applyBusiness(exec: Exec, businessId: string, pushes: readonly QueuedPush[]): Promise<PushOutcome[]> {
    let serverVersion = Number((await exec<{ server_version: number }>(hot.lockCounter, [businessId]))[0]!.server_version);
    const allowed = await byMembers(exec, businessId, pushes);
    const records = await readRecords(exec, businessId, [...allowed]);
    const changes: PendingChange[] = [];
    const written = new Map<string, RecordState>();
    const out: PushOutcome[] = [];
    for (const queued of pushes) {
      if (!allowed.has(queued)) {
        out.push({ refused: 'not_member' });
        continue;
      }
      const { push, now } = queued;
      const state = new Map<string, RecordState>();
      const behind = [];
      for (const i of push.items) {
        const key = recordKey(i.tableName, i.recordUuid);
        const current = records.get(key);
        if (!current) continue;
        state.set(key, current);
        if (i.version <= current.recordVersion) behind.push(i);
      }
      let history = { ownChanges: new Map<string, PriorChange>(), ownConflicts: new Map<string, Conflict[]>() };
      if (behind.length) {
        await write(exec, businessId, changes, written);
        history = await ownHistory(exec, businessId, push, behind, records);
      }
      const plan = planPush({ serverVersion, records: state, ...history }, push.instanceId, push.items);
      for (const r of plan.records) {
        const key = recordKey(r.tableName, r.recordUuid);
        records.set(key, r);
        written.set(key, r);
      }
      for (const c of plan.changes) changes.push({ ...c, instanceId: push.instanceId, createdAt: now });
      const conflicts: Conflict[] = [];
      for (const slot of plan.conflicts) {
        conflicts.push('existing' in slot ? slot.existing : await insertConflict(exec, businessId, push, slot.item, slot.remote, now));
      }
      serverVersion = plan.serverVersion;
      out.push({
        accepted: plan.accepted, rejections: plan.rejections, serverVersion, conflicts,
        applied: plan.changes.map((c) => ({
          version: c.serverVersion, table_name: c.tableName, record_uuid: c.recordUuid, instance_id: push.instanceId,
          operation: c.operation, data: c.data, record_version: c.recordVersion, created_at: isoTime(now),
        })),
      });
    }
    await write(exec, businessId, changes, written);
    return out;
  }

  async function insertConflict(exec: Exec, businessId: string, push: PushCommand, item: PushItem, remote: RecordState, createdAt: number): Promise<Conflict> {
    const [row] = await exec<ConflictRow>(hot.insertConflict, [
      businessId, push.branch, item.tableName, item.recordUuid, item.operation, item.version, push.instanceId, localData(item), remote.data ?? 'null', createdAt,
    ]);
    return toConflict(row!);
  }

  return async (exec, group) => {
    const byBusiness = new Map<string, number[]>();
    group.forEach((q, i) => {
      const list = byBusiness.get(q.businessId);
      if (list) list.push(i);
      else byBusiness.set(q.businessId, [i]);
    });
    const out: PushOutcome[] = new Array(group.length);
    for (const [businessId, indexes] of byBusiness) {
      const results = await applyBusiness(exec, businessId, indexes.map((i) => group[i]!));
      indexes.forEach((i, k) => { out[i] = results[k]!; });
    }
    return out;
  };
}
