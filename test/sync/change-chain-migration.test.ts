import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openDatabase } from '../../src/core/storage/database.js';
import { syncMigrations } from '../../src/sync/storage/migrations/index.js';
import type { SyncTables } from '../../src/sync/deps.js';
import { createKyselyChangeStore } from '../../src/sync/changes/kysely-change-store.js';
import { validatePushItems } from '../../src/sync/changes/push-validation.js';
import { BACKENDS, freshStorage } from '../helpers/backends.js';

const before0006 = (dialect: 'sqlite' | 'postgres') => Object.fromEntries(Object.entries(syncMigrations(dialect)).filter(([name]) => name < '0006'));
const push = (instanceId: string, recordUuid: string, version: number, data: Record<string, unknown>) =>
  ({ userId: null, instanceId, branch: 'main', items: validatePushItems([{ table_name: 'customers', record_uuid: recordUuid, version, operation: version === 1 ? 'create' : 'update', data }], []).items });

for (const backend of BACKENDS) {
  describe(`migration 0006 (change chain) on ${backend}`, () => {
    test('links the changes already stored to their record\'s previous one, so retries of old pushes are still recognised', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const options = { databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db' };
      const biz = randomUUID();
      const r = randomUUID();
      const other = randomUUID();
      const old = await openDatabase<SyncTables>({ ...options, migrations: before0006 });
      // A business as the previous release stored it: R changed by d1, d2, then d1 again, another record in between.
      const rows = [[r, 1, 'd1', '{"v":1}'], [r, 2, 'd2', '{"v":2}'], [other, 1, 'd1', '{"v":1}'], [r, 3, 'd1', '{"v":3}']] as const;
      await old.db.insertInto('sync_changes').values(rows.map(([uuid, recordVersion, instance, data], i) => ({
        business_id: biz, version: i + 1, table_name: 'customers', record_uuid: uuid, operation: recordVersion === 1 ? 'create' : 'update', data, record_version: recordVersion, instance_id: instance, created_at: 1000,
      })) as never).execute(); // typed for the current schema, which has prev_version
      await old.db.insertInto('sync_records').values([
        { business_id: biz, table_name: 'customers', record_uuid: r, record_version: 3, server_version: 4, instance_id: 'd1', data: '{"v":3}' },
        { business_id: biz, table_name: 'customers', record_uuid: other, record_version: 1, server_version: 3, instance_id: 'd1', data: '{"v":1}' },
      ]).execute();
      await old.db.insertInto('sync_counters').values({ business_id: biz, server_version: 4 }).execute();
      await old.close();

      const database = await openDatabase<SyncTables>({ ...options, migrations: syncMigrations });
      t.after(() => database.close());
      const chain = await database.db.selectFrom('sync_changes').select(['version', 'prev_version']).where('business_id', '=', biz).orderBy('version').execute();
      assert.deepEqual(chain.map((c) => [Number(c.version), c.prev_version === null ? null : Number(c.prev_version)]), [[1, null], [2, 1], [3, null], [4, 2]]);
      const indexes = backend === 'sqlite'
        ? (await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sync_changes'`.execute(database.db)).rows.map((x) => x.name)
        : (await sql<{ name: string }>`SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'sync_changes'`.execute(database.db)).rows.map((x) => x.name);
      assert.ok(!indexes.includes('sync_changes_record_idx'), `the per-record index is gone: ${indexes.join(', ')}`);

      const store = createKyselyChangeStore(database.db, database.dialect);
      t.after(() => store.close());
      for (const [instance, version, data] of [['d2', 2, { v: 2 }], ['d1', 1, { v: 1 }]] as const) {
        const again = await store.applyPush(biz, push(instance, r, version, data), 2000);
        assert.deepEqual([again.accepted, again.applied.length, again.conflicts.length], [1, 0, 0], `${instance} v${version} is a retry`);
      }
      assert.equal((await store.applyPush(biz, push('d3', r, 2, { v: 2 }), 2000)).conflicts.length, 1, 'd3 never pushed it');
      const next = await store.applyPush(biz, push('d2', r, 4, { v: 4 }), 2000);
      assert.deepEqual(next.applied.map((c) => c.version), [5]);
      const linked = await database.db.selectFrom('sync_changes').select('prev_version').where('business_id', '=', biz).where('version', '=', 5).executeTakeFirstOrThrow();
      assert.equal(Number(linked.prev_version), 4, 'a new change links to the record\'s latest');
    });
  });
}
