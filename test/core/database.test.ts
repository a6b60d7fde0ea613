import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql, type Kysely } from 'kysely';
import { openDatabase } from '../../src/core/storage/database.js';
import { BACKENDS, freshStorage } from '../helpers/backends.js';

const migrations = () => ({
  '0001_items': {
    async up(db: Kysely<unknown>) {
      await db.schema.createTable('items').addColumn('id', 'integer', (c) => c.primaryKey()).addColumn('big', 'bigint').execute();
    },
  },
});

for (const backend of BACKENDS) {
  describe(`database on ${backend}`, () => {
    test('opens, migrates once, and returns bigint as number', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const opts = { databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'x.db', migrations };
      const a = await openDatabase<{ items: { id: number; big: number } }>(opts);
      await a.db.insertInto('items').values({ id: 1, big: 1_700_000_000_000 }).execute();
      await a.close();
      const b = await openDatabase<{ items: { id: number; big: number } }>(opts);
      t.after(() => b.close());
      const row = await b.db.selectFrom('items').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual(row, { id: 1, big: 1_700_000_000_000 });
      const n = await sql<{ n: number }>`select count(*) as n from schema_migrations`.execute(b.db);
      assert.equal(Number(n.rows[0]?.n), 1);
    });

    test('a failing migration stops the open', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      await assert.rejects(
        openDatabase({ databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'x.db', migrations: () => ({ '0001_bad': { async up(db: Kysely<unknown>) { await sql`this is not sql`.execute(db); } } }) }),
        /migration 0001_bad failed/,
      );
    });
  });
}
