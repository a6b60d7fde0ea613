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

const items = (n: number) => validatePushItems(Array.from({ length: n }, () => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { a: 1 } })), []).items;

for (const backend of BACKENDS) {
  describe(`change store on ${backend}`, () => {
    test('a push that fails part way commits nothing: no change, no record, no server version', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const database = await openDatabase<SyncTables>({ databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db', migrations: syncMigrations });
      t.after(() => database.close());
      const store = createKyselyChangeStore(database.db, database.dialect);
      const business = randomUUID();
      assert.equal((await store.applyPush(business, { userId: null, instanceId: 'd', branch: 'main', items: items(2) }, Date.now())).serverVersion, 2);
      // Make the step after the change-log insert fail: writing record states is refused inside the transaction.
      if (backend === 'sqlite') await sql`CREATE TRIGGER refuse BEFORE INSERT ON sync_records BEGIN SELECT RAISE(ABORT, 'refused'); END`.execute(database.db);
      else await sql`ALTER TABLE sync_records ADD CONSTRAINT refuse CHECK (record_version < 0) NOT VALID`.execute(database.db);
      await assert.rejects(store.applyPush(business, { userId: null, instanceId: 'd', branch: 'main', items: items(3) }, Date.now()), /refused|refuse/);
      if (backend === 'sqlite') await sql`DROP TRIGGER refuse`.execute(database.db);
      else await sql`ALTER TABLE sync_records DROP CONSTRAINT refuse`.execute(database.db);
      const page = await store.pull(business, 0, 100);
      assert.equal(page.changes.length, 2);
      assert.equal(page.version, 2);
      assert.equal((await store.status(business)).serverVersion, 2);
      assert.equal((await store.applyPush(business, { userId: null, instanceId: 'd', branch: 'main', items: items(1) }, Date.now())).serverVersion, 3, 'no version was used up');
    });
  });
}
