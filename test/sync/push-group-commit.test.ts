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

const items = (n: number, table = 'customers') => validatePushItems(Array.from({ length: n }, () => ({ table_name: table, record_uuid: randomUUID(), version: 1, operation: 'create', data: { a: 1 } })), []).items;

for (const backend of BACKENDS) {
  describe(`change store group commit on ${backend}`, () => {
    test('concurrent pushes share transactions yet each is answered with its own gap-free versions; a failing push fails alone', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const database = await openDatabase<SyncTables>({ databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db', migrations: syncMigrations });
      t.after(() => database.close());
      const store = createKyselyChangeStore(database.db, database.dialect);
      const business = randomUUID();
      const other = randomUUID();

      const results = await Promise.all(Array.from({ length: 24 }, (_, i) => store.applyPush(i % 4 === 3 ? other : business, { instanceId: `d${i}`, branch: 'main', items: items(5) }, Date.now())));
      for (const r of results) {
        assert.equal(r.accepted, 5);
        assert.deepEqual(r.applied.map((c) => c.version), Array.from({ length: 5 }, (_, k) => r.serverVersion - 4 + k), 'a push gets consecutive versions ending at its answer');
      }
      const versionsOf = (b: string) => results.filter((_, i) => (i % 4 === 3) === (b === other)).flatMap((r) => r.applied.map((c) => c.version)).sort((a, b) => a - b);
      assert.deepEqual(versionsOf(business), Array.from({ length: 90 }, (_, k) => k + 1));
      assert.deepEqual(versionsOf(other), Array.from({ length: 30 }, (_, k) => k + 1));
      assert.equal((await store.pull(business, 0, 1000)).changes.length, 90);

      if (backend === 'sqlite') await sql`CREATE TRIGGER refuse BEFORE INSERT ON sync_records WHEN NEW.table_name = 'poison' BEGIN SELECT RAISE(ABORT, 'refused'); END`.execute(database.db);
      else await sql`ALTER TABLE sync_records ADD CONSTRAINT refuse CHECK (table_name <> 'poison') NOT VALID`.execute(database.db);
      const mixed = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => store.applyPush(business, { instanceId: `m${i}`, branch: 'main', items: items(2, i === 2 ? 'poison' : 'customers') }, Date.now())));
      assert.deepEqual(mixed.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
      const page = await store.pull(business, 90, 1000);
      assert.deepEqual(page.changes.map((c) => c.version), Array.from({ length: 10 }, (_, k) => 91 + k), 'the failed push used up no version');
      assert.ok(page.changes.every((c) => c.table_name === 'customers'));
    });
  });
}
