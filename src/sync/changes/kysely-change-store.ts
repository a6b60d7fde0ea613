import { CompiledQuery, type Kysely, type Selectable, type Transaction } from 'kysely';
import { AppError } from '../../core/errors.js';
import type { DialectName } from '../../core/storage/database.js';
import type { Change, Conflict, ConflictFilter, Operation, Resolution } from './change-schemas.js';
import type { AppliedPush, ChangeStore, PushCommand } from './change-store.js';
import type { ChangeTables } from './change-tables.js';
import { attemptKey, localData, planPush, recordKey, type PlannedChange, type PriorChange, type PushState, type RecordState } from './push-plan.js';
import type { PushItem } from './push-validation.js';
import { createPushGroupCommitter } from './push-group-commit.js';

type Db = Kysely<ChangeTables>;
type Trx = Transaction<ChangeTables>;
type ChangeRow = Selectable<ChangeTables['sync_changes']>;
type ConflictRow = Selectable<ChangeTables['sync_conflicts']>;
type RecordRow = Omit<Selectable<ChangeTables['sync_records']>, 'business_id'>;

/** Rows per multi-row INSERT of the builder path (conflict resolution): far below SQLite's and PostgreSQL's bound-parameter limits. */
const INSERT_CHUNK = 500;

/** Pushes per group-commit transaction: bounds how long one transaction holds a business's counter. */
const MAX_GROUP = 32;

/**
 * The hot path's SQL, one constant text per statement and dialect, so each is
 * prepared once (SQLite statement cache, PostgreSQL named statements) and no
 * query builder runs per push. Rows travel as one JSON array (SQLite,
 * `json_each`) or as column arrays (PostgreSQL, `unnest`), so the text does not
 * depend on the number of rows.
 */
interface HotSql {
  lockCounter: string;
  readCounter: string;
  setCounter: string;
  /** Records by (table_name, record_uuid): primary-key lookups. */
  recordsByKey: string;
  /** Inserts the changes (RETURNING id, version) and upserts the record states. */
  writeChanges: string;
  /** SQLite only: PostgreSQL does it in `writeChanges`. */
  writeRecords?: string;
  pull: string;
}

const RECORD_COLUMNS = 'table_name, record_uuid, record_version, server_version, instance_id, data';
const CHANGE_COLUMNS = 'id, business_id, version, table_name, record_uuid, operation, data, record_version, instance_id, created_at';
const UPSERT_RECORD = 'ON CONFLICT (business_id, table_name, record_uuid) DO UPDATE SET record_version = excluded.record_version, server_version = excluded.server_version, instance_id = excluded.instance_id, data = excluded.data';

const SQLITE_SQL: HotSql = {
  lockCounter: 'INSERT INTO sync_counters (business_id, server_version) VALUES (?, 0) ON CONFLICT (business_id) DO UPDATE SET server_version = sync_counters.server_version RETURNING server_version',
  readCounter: 'SELECT server_version FROM sync_counters WHERE business_id = ?',
  setCounter: 'UPDATE sync_counters SET server_version = ? WHERE business_id = ?',
  recordsByKey: `SELECT ${RECORD_COLUMNS} FROM sync_records WHERE business_id = ? AND (table_name, record_uuid) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))`,
  writeChanges: 'INSERT INTO sync_changes (business_id, version, table_name, record_uuid, operation, data, record_version, instance_id, created_at) '
    + "SELECT ?, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]', value ->> '$[5]', ?, ? FROM json_each(?) ORDER BY key RETURNING id, version",
  // `WHERE true` lets SQLite parse ON CONFLICT after INSERT ... SELECT.
  writeRecords: 'INSERT INTO sync_records (business_id, table_name, record_uuid, record_version, server_version, instance_id, data) '
    + "SELECT ?, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]', value ->> '$[5]' FROM json_each(?) WHERE true " + UPSERT_RECORD,
  pull: `SELECT ${CHANGE_COLUMNS} FROM sync_changes WHERE business_id = ? AND version > ? AND version <= ? ORDER BY version LIMIT ?`,
};

const PG_SQL: HotSql = {
  lockCounter: 'INSERT INTO sync_counters (business_id, server_version) VALUES ($1, 0) ON CONFLICT (business_id) DO UPDATE SET server_version = sync_counters.server_version RETURNING server_version',
  readCounter: 'SELECT server_version FROM sync_counters WHERE business_id = $1',
  setCounter: 'UPDATE sync_counters SET server_version = $1 WHERE business_id = $2',
  recordsByKey: `SELECT ${RECORD_COLUMNS} FROM sync_records WHERE business_id = $1 AND (table_name, record_uuid) IN (SELECT * FROM unnest($2::text[], $3::text[]))`,
  writeChanges: 'WITH ins AS (INSERT INTO sync_changes (business_id, version, table_name, record_uuid, operation, data, record_version, instance_id, created_at) '
    + 'SELECT $1, v, t, u, o, d, rv, $2, $3 FROM unnest($4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[]) AS c(v, t, u, o, d, rv) RETURNING id, version), '
    + 'rec AS (INSERT INTO sync_records (business_id, table_name, record_uuid, record_version, server_version, instance_id, data) '
    + `SELECT $1, t, u, rv, sv, i, d FROM unnest($10::text[], $11::text[], $12::bigint[], $13::bigint[], $14::text[], $15::text[]) AS r(t, u, rv, sv, i, d) ${UPSERT_RECORD}) `
    + 'SELECT id, version FROM ins',
  pull: `SELECT ${CHANGE_COLUMNS} FROM sync_changes WHERE business_id = $1 AND version > $2 AND version <= $3 ORDER BY version LIMIT $4`,
};

interface QueuedPush { businessId: string; push: PushCommand; now: number }

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
export function createKyselyChangeStore(db: Db, dialect: DialectName): ChangeStore {
  const hot = dialect === 'postgres' ? PG_SQL : SQLITE_SQL;
  const run = async <R>(executor: Db | Trx, text: string, params: unknown[]): Promise<R[]> =>
    (await executor.executeQuery<R>(CompiledQuery.raw(text, params))).rows;
  // SQLite has one connection, so one queue serves every business. On PostgreSQL pushes of one business
  // queue behind its counter row lock anyway; other businesses go on in parallel on other connections.
  const committer = createPushGroupCommitter<QueuedPush, AppliedPush>(
    (group) => db.transaction().execute((trx) => applyGroup(trx, group)),
    { maxBatch: MAX_GROUP },
  );

  async function applyGroup(trx: Trx, group: QueuedPush[]): Promise<AppliedPush[]> {
    const counters = new Map<string, { locked: number; current: number }>();
    const out: AppliedPush[] = [];
    for (const { businessId, push, now } of group) {
      let counter = counters.get(businessId);
      if (!counter) {
        const locked = Number((await run<{ server_version: number }>(trx, hot.lockCounter, [businessId]))[0]!.server_version);
        counters.set(businessId, (counter = { locked, current: locked }));
      }
      const state = await loadPushState(trx, businessId, push, counter.current);
      const plan = planPush(state, push.instanceId, push.items);
      const applied = await writeChanges(trx, businessId, push.instanceId, plan.changes, plan.records, now);
      const conflicts: Conflict[] = [];
      for (const slot of plan.conflicts) {
        if ('existing' in slot) conflicts.push(slot.existing);
        else conflicts.push(await insertConflict(trx, businessId, push, slot.item, slot.remote, now));
      }
      counter.current = plan.serverVersion;
      out.push({ accepted: plan.accepted, rejections: plan.rejections, serverVersion: plan.serverVersion, conflicts, applied });
    }
    for (const [businessId, c] of counters) if (c.current !== c.locked) await run(trx, hot.setCounter, [c.current, businessId]);
    return out;
  }

  async function loadPushState(trx: Trx, businessId: string, push: PushCommand, serverVersion: number): Promise<PushState> {
    const records = new Map<string, RecordState>();
    const ownChanges = new Map<string, PriorChange>();
    const ownConflicts = new Map<string, Conflict>();
    const keys = [...new Map(push.items.map((i) => [recordKey(i.tableName, i.recordUuid), [i.tableName, i.recordUuid] as const])).values()];
    if (!keys.length) return { serverVersion, records, ownChanges, ownConflicts };

    const rows = await run<RecordRow>(trx, hot.recordsByKey, dialect === 'postgres'
      ? [businessId, keys.map((k) => k[0]), keys.map((k) => k[1])]
      : [businessId, JSON.stringify(keys)]);
    for (const r of rows) {
      records.set(recordKey(r.table_name, r.record_uuid), {
        tableName: r.table_name, recordUuid: r.record_uuid, recordVersion: Number(r.record_version), serverVersion: Number(r.server_version), instanceId: r.instance_id, data: r.data,
      });
    }

    // Only an item at or below the server's record version can be a retry or a conflict; that path is rare and uses the builder.
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

  /** Inserts the applied changes and writes the final record states: one statement on PostgreSQL, two on SQLite. */
  async function writeChanges(trx: Trx, businessId: string, instanceId: string, changes: PlannedChange[], records: RecordState[], createdAt: number): Promise<Change[]> {
    if (!changes.length) return [];
    let ids: { id: number; version: number }[];
    if (dialect === 'postgres') {
      ids = await run(trx, hot.writeChanges, [
        businessId, instanceId, createdAt,
        changes.map((c) => c.serverVersion), changes.map((c) => c.tableName), changes.map((c) => c.recordUuid), changes.map((c) => c.operation), changes.map((c) => c.data), changes.map((c) => c.recordVersion),
        records.map((r) => r.tableName), records.map((r) => r.recordUuid), records.map((r) => r.recordVersion), records.map((r) => r.serverVersion), records.map((r) => r.instanceId), records.map((r) => r.data),
      ]);
    } else {
      ids = await run(trx, hot.writeChanges, [businessId, instanceId, createdAt, JSON.stringify(changes.map((c) => [c.serverVersion, c.tableName, c.recordUuid, c.operation, c.data, c.recordVersion]))]);
      await run(trx, hot.writeRecords!, [businessId, JSON.stringify(records.map((r) => [r.tableName, r.recordUuid, r.recordVersion, r.serverVersion, r.instanceId, r.data]))]);
    }
    const idByVersion = new Map(ids.map((r) => [Number(r.version), Number(r.id)]));
    const at = new Date(createdAt).toISOString();
    return changes.map((c) => ({
      id: idByVersion.get(c.serverVersion)!,
      business_id: businessId,
      version: c.serverVersion,
      table_name: c.tableName,
      record_uuid: c.recordUuid,
      operation: c.operation,
      data: c.data === null ? {} : (JSON.parse(c.data) as Record<string, unknown>),
      record_version: c.recordVersion,
      instance_id: instanceId,
      created_at: at,
    }));
  }

  return {
    applyPush(businessId, push, now) {
      return committer.submit(dialect === 'sqlite' ? '' : businessId, { businessId, push, now });
    },

    async pull(businessId, sinceVersion, limit) {
      // Read the counter first: every change up to it is committed (changes and
      // counter commit together), so bounding by it gives a consistent page.
      const current = Number((await run<{ server_version: number }>(db, hot.readCounter, [businessId]))[0]?.server_version ?? 0);
      if (sinceVersion >= current) return { changes: [], hasMore: false, version: current };
      const rows = await run<ChangeRow>(db, hot.pull, [businessId, sinceVersion, current, limit + 1]);
      const hasMore = rows.length > limit;
      const page = hasMore ? rows.slice(0, limit) : rows;
      return { changes: page.map(toChange), hasMore, version: hasMore ? Number(page[page.length - 1]!.version) : current };
    },

    async status(businessId) {
      const serverVersion = Number((await run<{ server_version: number }>(db, hot.readCounter, [businessId]))[0]?.server_version ?? 0);
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
    created_at: isoTime(row.created_at),
  };
}

// A push's changes share one created_at, so a pulled page repeats few distinct times; formatting each once saves pull CPU.
let lastTime = NaN;
let lastIso = '';
function isoTime(ms: number): string {
  if (ms !== lastTime) {
    lastTime = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
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
