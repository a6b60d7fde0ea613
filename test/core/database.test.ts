import { describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import BetterSqlite3 from 'better-sqlite3';
import { sql, type Kysely } from 'kysely';
import { openDatabase } from '../../src/core/storage/database.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
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

    test('a failing migration rolls back the ones applied before it in the same start', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const base = { databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'x.db' };
      const bad = { async up(db: Kysely<unknown>) { await sql`this is not sql`.execute(db); } };
      await assert.rejects(openDatabase({ ...base, migrations: () => ({ ...migrations(), '0002_bad': bad }) }), /migration 0002_bad failed/);
      const db = await openDatabase<{ items: { id: number } }>({ ...base, migrations: () => ({}) });
      t.after(() => db.close());
      const applied = await sql<{ name: string }>`select name from schema_migrations`.execute(db.db);
      assert.deepEqual(applied.rows, []);
      await assert.rejects(db.db.selectFrom('items').selectAll().execute(), 'items was rolled back');
    });

    test('processes opening one fresh database together apply each migration once', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const opts = { databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'x.db' };
      // Separate processes, as instances are: better-sqlite3 waits for a lock synchronously, so one process cannot show this.
      const script = `
        import { sql } from 'kysely';
        import { openDatabase } from ${JSON.stringify(path.join(PROJECT_ROOT, 'src/core/storage/database.ts'))};
        const migrations = () => ({ '0001_items': { async up(db) {
          await sql\`create table items (id integer primary key)\`.execute(db);
          await new Promise((r) => setTimeout(r, 1500));
        } } });
        const d = await openDatabase({ ...${JSON.stringify(opts)}, migrations });
        await d.close();`;
      const runs = await Promise.all([1, 2, 3].map(() => new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: PROJECT_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
        child.once('exit', resolve);
      })));
      assert.deepEqual(runs, [0, 0, 0]);
      // The same migration, already applied: this open runs nothing (one it did not know would be refused).
      const db = await openDatabase({ ...opts, migrations: () => ({ '0001_items': { async up() { throw new Error('applied again'); } } }) });
      t.after(() => db.close());
      const n = await sql<{ n: number }>`select count(*) as n from schema_migrations`.execute(db.db);
      assert.equal(Number(n.rows[0]?.n), 1);
    });
  });
}

describe('database on sqlite with a second writer (a writer thread)', () => {
  test('a transaction takes the write lock when it begins, so another connection cannot commit between its read and its write', async (t) => {
    const s = await freshStorage('sqlite');
    t.after(() => s.cleanup());
    const d = await openDatabase<{ items: { id: number; big: number } }>({ databaseUrl: undefined, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'x.db', migrations });
    t.after(() => d.close());
    const other = new BetterSqlite3(path.join(s.dataDir, 'x.db'));
    t.after(() => other.close());
    other.pragma('busy_timeout = 0');
    await d.db.transaction().execute(async (trx) => {
      await trx.selectFrom('items').selectAll().execute();
      // Deferred, this commit would succeed and the write below fail with SQLITE_BUSY_SNAPSHOT.
      assert.throws(() => other.prepare('INSERT INTO items (id, big) VALUES (2, 2)').run(), /SQLITE_BUSY|database is locked/);
      await trx.insertInto('items').values({ id: 1, big: 1 }).execute();
    });
    other.prepare('INSERT INTO items (id, big) VALUES (2, 2)').run();
    assert.deepEqual((await d.db.selectFrom('items').select('id').orderBy('id').execute()).map((r) => r.id), [1, 2]);
  });
});

test('a data directory the embedded database creates is private (0700): it holds token and password hashes', async (t) => {
  const s = await freshStorage('sqlite');
  t.after(() => s.cleanup());
  const dataDir = path.join(s.dataDir, 'new', 'data');
  const d = await openDatabase({ databaseUrl: undefined, pgSchema: 'unused', dataDir, sqliteFile: 'x.db', migrations });
  t.after(() => d.close());
  assert.equal(statSync(dataDir).mode & 0o777, 0o700);
});
