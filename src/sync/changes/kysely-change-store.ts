import { CompiledQuery, type Kysely, type Selectable, type Transaction } from 'kysely';
import { AppError } from '../../core/errors.js';
import type { DialectName } from '../../core/storage/database.js';
import type { ConflictFilter, Resolution } from './change-schemas.js';
import type { ChangeStore, StoredChange } from './change-store.js';
import type { ChangeTables } from './change-tables.js';
import { toConflict, toStoredChange, type ChangeRow } from './change-rows.js';
import { createGroupApplier, type PushOutcome, type QueuedPush } from './push-apply.js';
import { createPushGroupCommitter } from './push-group-commit.js';
import { pushSql } from './push-sql.js';
import type { PushThread } from './push-thread-client.js';

type Db = Kysely<ChangeTables>;
type Trx = Transaction<ChangeTables>;

/** Pushes per group-commit transaction, and items: bound how long one transaction holds a business's counter (on SQLite, the file's write lock). */
const MAX_GROUP = { pushes: 32, items: 4000 };
/** Longest a group waits for devices that are pushing but have nothing queued (push-group-commit.ts). */
const LINGER_MS = 4;
/** Rows read by one statement of a pull page: the first part comes with the counter, the rest are bounded by it. */
const PULL_PART = 1000;

export interface ChangeStoreOptions {
  /**
   * SQLite: push transactions run on this thread, on its own connection to the
   * file, so their statements, fsyncs and checkpoints leave the event loop.
   * Without it they run on `db`. The store closes it.
   */
  pushThread?: PushThread;
}

/**
 * The change store for both SQLite and PostgreSQL. Pushes go through a group
 * commit (push-group-commit.ts) and are applied by push-apply.ts; the hot SQL
 * is in push-sql.ts.
 *
 * Ordering guarantee: every writing transaction starts with an upsert of the
 * business's counter row. On PostgreSQL that takes the row lock until commit,
 * so writers of one business run one after another and commit in version
 * order; on SQLite every write transaction holds the file's write lock.
 * A reader sees a commit only once it is durable (PostgreSQL; SQLite WAL with
 * synchronous=FULL syncs before it publishes a commit), so no pulled change
 * can be lost by a crash.
 */
export function createKyselyChangeStore(db: Db, dialect: DialectName, options: ChangeStoreOptions = {}): ChangeStore {
  const hot = pushSql(dialect);
  const run = async <R>(executor: Db | Trx, text: string, params: unknown[]): Promise<R[]> =>
    (await executor.executeQuery<R>(CompiledQuery.raw(text, params))).rows;
  const apply = createGroupApplier(dialect);
  const thread = options.pushThread;
  // SQLite has one writer at a time, so one queue serves every business. On PostgreSQL pushes of one business
  // queue behind its counter row lock anyway; other businesses go on in parallel on other connections.
  const committer = createPushGroupCommitter<QueuedPush, PushOutcome>(
    thread ? (group) => thread.apply(group) : (group) => db.transaction().execute((trx) => apply((text, params) => run(trx, text, [...params]), group)),
    { maxBatch: MAX_GROUP.pushes, maxItems: MAX_GROUP.items, size: (q) => q.push.items.length, submitter: (q) => `${q.businessId}/${q.push.instanceId}`, lingerMs: LINGER_MS },
  );

  return {
    async applyPush(businessId, push, now) {
      const outcome = await committer.submit(dialect === 'sqlite' ? '' : businessId, { businessId, push, now });
      if ('refused' in outcome) throw notMember();
      return outcome;
    },

    async pull(businessId, sinceVersion, limit, maxBytes = Number.POSITIVE_INFINITY) {
      // The changes are bounded by the counter read in the same statement: every change up to it is committed
      // (changes and counter commit together), so the page is consistent. A large page is read in parts of at most
      // PULL_PART rows, each bounded by that counter, until it is full or its data reach maxBytes: a page of many
      // large records never holds more than one part beyond what it returns.
      let want = Math.min(limit, PULL_PART);
      const first = await run<ChangeRow & { current: number }>(db, hot.pull, dialect === 'postgres' ? [businessId, sinceVersion, want + 1] : [sinceVersion, businessId, want + 1]);
      const current = Number(first[0]?.current ?? 0);
      let rows: ChangeRow[] = first.filter((r) => r.id !== null);
      const page: ChangeRow[] = [];
      let bytes = 0;
      for (;;) {
        for (const r of rows) {
          if (page.length === limit || (page.length > 0 && bytes >= maxBytes)) {
            return { changes: page.map(toStoredChange), hasMore: true, version: Number(page[page.length - 1]!.version) };
          }
          page.push(r);
          bytes += r.data?.length ?? 0;
        }
        // A part shorter than asked for reached the counter.
        if (rows.length <= want) return { changes: page.map(toStoredChange), hasMore: false, version: current };
        want = Math.min(limit - page.length, PULL_PART);
        rows = await run<ChangeRow>(db, hot.pullAfter, [businessId, Number(page[page.length - 1]!.version), current, want + 1]);
      }
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

    async resolveConflict(businessId, conflictId, resolution: Resolution, now, userId) {
      return db.transaction().execute(async (trx) => {
        const serverVersion = Number((await run<{ server_version: number }>(trx, hot.lockCounter, [businessId]))[0]!.server_version);
        // As a push's: a removal that committed since the request's check refuses it, one from now on waits for it.
        if (userId !== null && !(await run(trx, hot.members, [businessId, dialect === 'postgres' ? [userId] : JSON.stringify([userId])])).length) throw notMember();
        const row = await trx.selectFrom('sync_conflicts').selectAll()
          .where('id', '=', conflictId).where('business_id', '=', businessId).executeTakeFirst();
        if (!row) throw new AppError('not_found', `conflict ${conflictId} not found`);
        if (row.resolution !== 'pending') throw new AppError('conflict', `conflict ${conflictId} is already resolved (${row.resolution})`);
        const applied = resolution === 'local' ? await applyLocal(trx, businessId, row, serverVersion + 1, now) : null;
        const updated = await trx.updateTable('sync_conflicts')
          .set({ resolution, resolved_at: now, applied_version: applied?.version ?? null })
          .where('id', '=', conflictId)
          .returningAll()
          .executeTakeFirstOrThrow();
        return { conflict: toConflict(updated), applied };
      });
    },

    close: async () => thread?.close(),
  };
}

function notMember(): AppError {
  return new AppError('forbidden', 'you are not a member of this business');
}

/** A `local` resolution: the conflict's pushed data becomes the record's next change, with the next server version. */
async function applyLocal(trx: Trx, businessId: string, conflict: Selectable<ChangeTables['sync_conflicts']>, serverVersion: number, now: number): Promise<StoredChange> {
  const current = await trx.selectFrom('sync_records').select(['record_version', 'server_version'])
    .where('business_id', '=', businessId).where('table_name', '=', conflict.table_name).where('record_uuid', '=', conflict.record_uuid)
    .executeTakeFirst();
  // Above both the server's and the device's numbering, so every device moves to it; past the version range no device could follow.
  const recordVersion = Math.max(current?.record_version ?? 0, conflict.version) + 1;
  if (recordVersion > Number.MAX_SAFE_INTEGER) {
    throw new AppError('conflict', `the record is at the highest version (${Number.MAX_SAFE_INTEGER}): a local resolution cannot number it; resolve remote or skip`);
  }
  const row = {
    business_id: businessId,
    version: serverVersion,
    table_name: conflict.table_name,
    record_uuid: conflict.record_uuid,
    operation: conflict.operation,
    data: conflict.local_data === 'null' ? null : conflict.local_data,
    record_version: recordVersion,
    instance_id: conflict.instance_id,
    created_at: now,
  };
  const { id } = await trx.insertInto('sync_changes').values({ ...row, prev_version: current?.server_version ?? null, resolves_conflict: conflict.id })
    .returning('id').executeTakeFirstOrThrow();
  // The record's state is from no device (''): the conflict's device never pushed this version, so its own edit at or
  // below it is a conflict with it, not a retry nor stale.
  const state = { record_version: row.record_version, server_version: serverVersion, instance_id: '', data: row.data };
  await trx.insertInto('sync_records').values({ business_id: businessId, table_name: row.table_name, record_uuid: row.record_uuid, ...state })
    .onConflict((oc) => oc.columns(['business_id', 'table_name', 'record_uuid']).doUpdateSet(state))
    .execute();
  await trx.updateTable('sync_counters').set({ server_version: serverVersion }).where('business_id', '=', businessId).execute();
  return toStoredChange({ ...row, id });
}
