import type { Kysely, Selectable, Transaction } from 'kysely';
import { AppError } from '../../core/errors.js';
import type { Change, Conflict, ConflictFilter, Operation, Resolution } from './change-schemas.js';
import type { ChangeStore, PushCommand } from './change-store.js';
import type { ChangeTables } from './change-tables.js';
import { attemptKey, localData, planPush, recordKey, type PlannedChange, type PriorChange, type PushState, type RecordState } from './push-plan.js';
import type { PushItem } from './push-validation.js';

type Db = Kysely<ChangeTables>;
type Trx = Transaction<ChangeTables>;
type ChangeRow = Selectable<ChangeTables['sync_changes']>;
type ConflictRow = Selectable<ChangeTables['sync_conflicts']>;

/** Rows per multi-row INSERT: far below SQLite's and PostgreSQL's bound-parameter limits. */
const INSERT_CHUNK = 500;

/**
 * The change store for both SQLite and PostgreSQL. The SQL is the same on both
 * (upsert with RETURNING, multi-row inserts); only the id column types differ,
 * and those live in the migration.
 *
 * Ordering guarantee: every writing transaction starts with an upsert of the
 * business's counter row. On PostgreSQL that takes the row lock until commit,
 * so writers of one business run one after another and commit in version
 * order; on SQLite the single connection already serialises transactions.
 */
export function createKyselyChangeStore(db: Db): ChangeStore {
  return {
    async applyPush(businessId, push, now) {
      return db.transaction().execute(async (trx) => {
        const state = await loadPushState(trx, businessId, push);
        const plan = planPush(state, push.instanceId, push.items);
        const createdAt = now;
        const applied = await insertChanges(trx, businessId, push.instanceId, plan.changes, createdAt);
        await upsertRecords(trx, businessId, plan.records);
        const conflicts: Conflict[] = [];
        for (const slot of plan.conflicts) {
          if ('existing' in slot) conflicts.push(slot.existing);
          else conflicts.push(await insertConflict(trx, businessId, push, slot.item, slot.remote, createdAt));
        }
        if (plan.serverVersion !== state.serverVersion) await setCounter(trx, businessId, plan.serverVersion);
        return { accepted: plan.accepted, rejections: plan.rejections, serverVersion: plan.serverVersion, conflicts, applied };
      });
    },

    async pull(businessId, sinceVersion, limit) {
      // Read the counter first: every change up to it is committed (changes and
      // counter commit together), so bounding by it gives a consistent page.
      const current = await readCounter(db, businessId);
      if (sinceVersion >= current) return { changes: [], hasMore: false, version: current };
      const rows = await db.selectFrom('sync_changes').selectAll()
        .where('business_id', '=', businessId)
        .where('version', '>', sinceVersion)
        .where('version', '<=', current)
        .orderBy('version')
        .limit(limit + 1)
        .execute();
      const hasMore = rows.length > limit;
      const page = hasMore ? rows.slice(0, limit) : rows;
      return { changes: page.map(toChange), hasMore, version: hasMore ? page[page.length - 1]!.version : current };
    },

    async status(businessId) {
      const serverVersion = await readCounter(db, businessId);
      const row = await db.selectFrom('sync_conflicts').select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('business_id', '=', businessId).where('resolution', '=', 'pending').executeTakeFirst();
      return { serverVersion, pendingConflicts: Number(row?.n ?? 0) };
    },

    async listConflicts(businessId, filter: ConflictFilter, afterId, limit) {
      let q = db.selectFrom('sync_conflicts').selectAll().where('business_id', '=', businessId).where('id', '>', afterId);
      if (filter === 'pending') q = q.where('resolution', '=', 'pending');
      else if (filter === 'resolved') q = q.where('resolution', '!=', 'pending');
      const rows = await q.orderBy('id').limit(limit).execute();
      return rows.map(toConflict);
    },

    async conflictBusiness(conflictId) {
      const row = await db.selectFrom('sync_conflicts').select('business_id').where('id', '=', conflictId).executeTakeFirst();
      return row?.business_id;
    },

    async resolveConflict(businessId, conflictId, resolution: Resolution, now) {
      return db.transaction().execute(async (trx) => {
        const serverVersion = await lockCounter(trx, businessId);
        const row = await trx.selectFrom('sync_conflicts').selectAll()
          .where('id', '=', conflictId).where('business_id', '=', businessId).executeTakeFirst();
        if (!row) throw new AppError('not_found', `conflict ${conflictId} not found`);
        if (row.resolution !== 'pending') throw new AppError('conflict', `conflict ${conflictId} is already resolved (${row.resolution})`);
        const at = now;
        let applied: Change | null = null;
        if (resolution === 'local') {
          const current = await trx.selectFrom('sync_records').select('record_version')
            .where('business_id', '=', businessId).where('table_name', '=', row.table_name).where('record_uuid', '=', row.record_uuid)
            .executeTakeFirst();
          const change: PlannedChange = {
            serverVersion: serverVersion + 1,
            tableName: row.table_name,
            recordUuid: row.record_uuid,
            operation: row.operation as Operation,
            data: row.local_data === 'null' ? null : row.local_data,
            // Above both the server's and the device's numbering, so every device moves to it.
            recordVersion: Math.max(current?.record_version ?? 0, row.version) + 1,
          };
          applied = (await insertChanges(trx, businessId, row.instance_id, [change], at))[0]!;
          await upsertRecords(trx, businessId, [{ tableName: change.tableName, recordUuid: change.recordUuid, recordVersion: change.recordVersion, serverVersion: change.serverVersion, instanceId: row.instance_id, data: change.data }]);
          await setCounter(trx, businessId, change.serverVersion);
        }
        const updated = await trx.updateTable('sync_conflicts')
          .set({ resolution, resolved_at: at, applied_version: applied?.version ?? null })
          .where('id', '=', conflictId)
          .returningAll()
          .executeTakeFirstOrThrow();
        return { conflict: toConflict(updated), applied };
      });
    },
  };
}

/** Takes (and creates) the business's counter row; the lock is what orders concurrent writers. */
async function lockCounter(trx: Trx, businessId: string): Promise<number> {
  const row = await trx.insertInto('sync_counters').values({ business_id: businessId, server_version: 0 })
    .onConflict((oc) => oc.column('business_id').doUpdateSet((eb) => ({ server_version: eb.ref('sync_counters.server_version') })))
    .returning('server_version')
    .executeTakeFirstOrThrow();
  return row.server_version;
}

async function setCounter(trx: Trx, businessId: string, serverVersion: number): Promise<void> {
  await trx.updateTable('sync_counters').set({ server_version: serverVersion }).where('business_id', '=', businessId).execute();
}

async function readCounter(db: Db, businessId: string): Promise<number> {
  const row = await db.selectFrom('sync_counters').select('server_version').where('business_id', '=', businessId).executeTakeFirst();
  return row?.server_version ?? 0;
}

async function loadPushState(trx: Trx, businessId: string, push: PushCommand): Promise<PushState> {
  const serverVersion = await lockCounter(trx, businessId);
  const records = new Map<string, RecordState>();
  const ownChanges = new Map<string, PriorChange>();
  const ownConflicts = new Map<string, Conflict>();
  const uuids = [...new Set(push.items.map((i) => i.recordUuid))];
  if (!uuids.length) return { serverVersion, records, ownChanges, ownConflicts };

  const rows = await trx.selectFrom('sync_records').selectAll()
    .where('business_id', '=', businessId).where('record_uuid', 'in', uuids).execute();
  for (const r of rows) {
    records.set(recordKey(r.table_name, r.record_uuid), {
      tableName: r.table_name, recordUuid: r.record_uuid, recordVersion: r.record_version, serverVersion: r.server_version, instanceId: r.instance_id, data: r.data,
    });
  }

  // Only an item at or below the server's record version can be a retry or a conflict.
  const behind = push.items.filter((i) => {
    const current = records.get(recordKey(i.tableName, i.recordUuid));
    return current !== undefined && i.version <= current.recordVersion;
  });
  if (!behind.length) return { serverVersion, records, ownChanges, ownConflicts };
  const behindUuids = [...new Set(behind.map((i) => i.recordUuid))];
  const wanted = new Set(behind.map((i) => attemptKey(i.tableName, i.recordUuid, i.version)));

  const priorChanges = await trx.selectFrom('sync_changes').select(['table_name', 'record_uuid', 'record_version', 'operation', 'data'])
    .where('business_id', '=', businessId).where('instance_id', '=', push.instanceId).where('record_uuid', 'in', behindUuids)
    .where('record_version', 'in', [...new Set(behind.map((i) => i.version))])
    .execute();
  for (const c of priorChanges) {
    const key = attemptKey(c.table_name, c.record_uuid, c.record_version);
    if (wanted.has(key)) ownChanges.set(key, { operation: c.operation as Operation, data: c.data });
  }
  const priorConflicts = await trx.selectFrom('sync_conflicts').selectAll()
    .where('business_id', '=', businessId).where('instance_id', '=', push.instanceId).where('record_uuid', 'in', behindUuids)
    .orderBy('id')
    .execute();
  for (const c of priorConflicts) {
    const key = attemptKey(c.table_name, c.record_uuid, c.version);
    if (wanted.has(key)) ownConflicts.set(key, toConflict(c));
  }
  return { serverVersion, records, ownChanges, ownConflicts };
}

async function insertChanges(trx: Trx, businessId: string, instanceId: string, changes: PlannedChange[], createdAt: number): Promise<Change[]> {
  const out: Change[] = [];
  for (let i = 0; i < changes.length; i += INSERT_CHUNK) {
    const rows = changes.slice(i, i + INSERT_CHUNK).map((c) => ({
      business_id: businessId,
      version: c.serverVersion,
      table_name: c.tableName,
      record_uuid: c.recordUuid,
      operation: c.operation,
      data: c.data,
      record_version: c.recordVersion,
      instance_id: instanceId,
      created_at: createdAt,
    }));
    const ids = await trx.insertInto('sync_changes').values(rows).returning(['id', 'version']).execute();
    const idByVersion = new Map(ids.map((r) => [r.version, r.id]));
    for (const row of rows) out.push(toChange({ ...row, id: idByVersion.get(row.version)! }));
  }
  return out;
}

async function upsertRecords(trx: Trx, businessId: string, records: RecordState[]): Promise<void> {
  for (let i = 0; i < records.length; i += INSERT_CHUNK) {
    const rows = records.slice(i, i + INSERT_CHUNK).map((r) => ({
      business_id: businessId,
      table_name: r.tableName,
      record_uuid: r.recordUuid,
      record_version: r.recordVersion,
      server_version: r.serverVersion,
      instance_id: r.instanceId,
      data: r.data,
    }));
    await trx.insertInto('sync_records').values(rows)
      .onConflict((oc) => oc.columns(['business_id', 'table_name', 'record_uuid']).doUpdateSet((eb) => ({
        record_version: eb.ref('excluded.record_version'),
        server_version: eb.ref('excluded.server_version'),
        instance_id: eb.ref('excluded.instance_id'),
        data: eb.ref('excluded.data'),
      })))
      .execute();
  }
}

async function insertConflict(trx: Trx, businessId: string, push: PushCommand, item: PushItem, remote: RecordState, createdAt: number): Promise<Conflict> {
  const row = await trx.insertInto('sync_conflicts').values({
    business_id: businessId,
    branch_name: push.branch,
    table_name: item.tableName,
    record_uuid: item.recordUuid,
    operation: item.operation,
    version: item.version,
    instance_id: push.instanceId,
    local_data: localData(item),
    remote_data: remote.data ?? 'null',
    resolution: 'pending',
    created_at: createdAt,
    resolved_at: null,
    applied_version: null,
  }).returningAll().executeTakeFirstOrThrow();
  return toConflict(row);
}

function toChange(row: ChangeRow): Change {
  return {
    id: row.id,
    business_id: row.business_id,
    version: row.version,
    table_name: row.table_name,
    record_uuid: row.record_uuid,
    operation: row.operation as Operation,
    data: row.data === null ? {} : (JSON.parse(row.data) as Record<string, unknown>),
    record_version: row.record_version,
    instance_id: row.instance_id,
    created_at: new Date(row.created_at).toISOString(),
  };
}

function toConflict(row: ConflictRow): Conflict {
  return {
    id: row.id,
    business_id: row.business_id,
    branch_name: row.branch_name,
    table_name: row.table_name,
    record_uuid: row.record_uuid,
    // Stored as the text 'null' (the columns are NOT NULL); answered as JSON null, as documented.
    local_data: row.local_data === 'null' ? null : row.local_data,
    remote_data: row.remote_data === 'null' ? null : row.remote_data,
    resolution: row.resolution as Conflict['resolution'],
    created_at: new Date(row.created_at).toISOString(),
    operation: row.operation as Operation,
    version: row.version,
    instance_id: row.instance_id,
    resolved_at: row.resolved_at === null ? null : new Date(row.resolved_at).toISOString(),
    applied_version: row.applied_version,
  };
}
