import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openDatabase } from '../../src/core/storage/database.js';
import { syncMigrations } from '../../src/sync/storage/migrations/index.js';
import type { SyncTables } from '../../src/sync/deps.js';
import { createKyselyChangeStore } from '../../src/sync/changes/kysely-change-store.js';
import { validatePushItems } from '../../src/sync/changes/push-validation.js';
import { BACKENDS, freshStorage } from '../helpers/backends.js';

const before0007 = (dialect: 'sqlite' | 'postgres') => Object.fromEntries(Object.entries(syncMigrations(dialect)).filter(([name]) => name < '0007'));
const push = (instanceId: string, recordUuid: string, version: number, data: Record<string, unknown>) =>
  ({ userId: null, instanceId, branch: 'main', items: validatePushItems([{ table_name: 'customers', record_uuid: recordUuid, version, operation: 'update', data }], []).items });

for (const backend of BACKENDS) {
  describe(`migration 0007 (resolution changes) on ${backend}`, () => {
    test('marks the local resolutions already stored, so their device\'s own edit at that version is a conflict, not refused', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const options = { databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db' };
      const biz = randomUUID();
      const r = randomUUID();
      const old = await openDatabase<SyncTables>({ ...options, migrations: before0007 });
      // As the previous release stored it: d1 created R; d2's version 1 conflicted and was resolved local, written as
      // version 2 with d2's id; d1's version 2 of R conflicted later and is still pending (no change of its own).
      await old.db.insertInto('sync_changes').values([
        { business_id: biz, version: 1, prev_version: null, table_name: 'customers', record_uuid: r, operation: 'create', data: '{"v":"d1"}', record_version: 1, instance_id: 'd1', created_at: 1000 },
        { business_id: biz, version: 2, prev_version: 1, table_name: 'customers', record_uuid: r, operation: 'update', data: '{"v":"d2"}', record_version: 2, instance_id: 'd2', created_at: 2000 },
      ] as never).execute(); // typed for the current schema, which has resolves_conflict
      await old.db.insertInto('sync_records').values({ business_id: biz, table_name: 'customers', record_uuid: r, record_version: 2, server_version: 2, instance_id: 'd2', data: '{"v":"d2"}' }).execute();
      await old.db.insertInto('sync_counters').values({ business_id: biz, server_version: 2 }).execute();
      const conflict = { business_id: biz, branch_name: 'main', table_name: 'customers', record_uuid: r, operation: 'create', version: 1, local_data: '{"v":"d2"}', remote_data: '{"v":"d1"}', created_at: 1500 };
      await old.db.insertInto('sync_conflicts').values([
        { ...conflict, instance_id: 'd2', resolution: 'local', resolved_at: 2000, applied_version: 2 },
        { ...conflict, instance_id: 'd1', version: 2, operation: 'update', resolution: 'pending', resolved_at: null, applied_version: null },
      ]).execute();
      await old.close();

      const database = await openDatabase<SyncTables>({ ...options, migrations: syncMigrations });
      t.after(() => database.close());
      const changes = await database.db.selectFrom('sync_changes').select(['version', 'resolves_conflict']).where('business_id', '=', biz).orderBy('version').execute();
      const [resolved] = await database.db.selectFrom('sync_conflicts').select('id').where('business_id', '=', biz).where('resolution', '=', 'local').execute();
      assert.deepEqual(changes.map((c) => [Number(c.version), c.resolves_conflict === null ? null : Number(c.resolves_conflict)]), [[1, null], [2, Number(resolved!.id)]]);
      const record = await database.db.selectFrom('sync_records').select('instance_id').where('business_id', '=', biz).executeTakeFirstOrThrow();
      assert.equal(record.instance_id, '', 'the record\'s state is from no device');

      const store = createKyselyChangeStore(database.db, database.dialect);
      t.after(() => store.close());
      const edit = await store.applyPush(biz, push('d2', r, 2, { v: 'd2 edited' }), 3000);
      assert.deepEqual([edit.accepted, edit.rejections, edit.conflicts.length], [0, [], 1], 'd2 never pushed version 2: a conflict, not "already pushed"');
      const next = await store.applyPush(biz, push('d1', r, 3, { v: 3 }), 3000);
      assert.deepEqual(next.applied.map((c) => c.version), [3]);
    });
  });
}
