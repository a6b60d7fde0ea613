import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql, type Migration } from 'kysely';
import { openDatabase } from '../../src/core/storage/database.js';
import { metricsMigrations, RETIRED_METRICS_MIGRATIONS } from '../../src/metrics/storage/migrations/index.js';
import { openMetricsDatabase } from '../../src/metrics/deps.js';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';

/**
 * A database carries the names of the migrations applied to it. One that holds
 * a name this version does not know was migrated by a newer version: opening
 * it would read and write a layout this code does not understand, so the start
 * is refused and nothing is changed. Names retired into later migrations are
 * still known.
 */
const table = (name: string): Migration => ({ up: async (db) => { await db.schema.createTable(name).addColumn('id', 'integer').execute(); } });

for (const backend of BACKENDS) {
  describe(`migrations a version does not know, on ${backend}`, () => {
    // One storage per test: on PostgreSQL a storage is one schema, and each test writes its own migrations' names there.
    let storage: TestStorage;
    beforeEach(async () => { storage = await freshStorage(backend); });
    afterEach(() => storage.cleanup());
    const options = (migrations: Record<string, Migration>) => ({
      databaseUrl: storage.databaseUrl, pgSchema: storage.pgSchema, dataDir: storage.dataDir, sqliteFile: 'unknown.db', migrations: () => migrations,
    });

    test('a database migrated by a newer version is refused at start, and is left as it was', async () => {
      const newer = await openDatabase(options({ '0001_a': table('a'), '0002_b': table('b') }));
      await newer.close();
      await assert.rejects(openDatabase(options({ '0001_a': table('a'), '0003_c': table('c') })),
        /migrated by a newer version of this service \(0002_b, unknown to this one\)/);
      const again = await openDatabase(options({ '0001_a': table('a'), '0002_b': table('b') }));
      try {
        const applied = await sql<{ name: string }>`SELECT name FROM schema_migrations ORDER BY name`.execute(again.db);
        assert.deepEqual(applied.rows.map((r) => r.name), ['0001_a', '0002_b'], 'the refused start applied nothing');
      } finally {
        await again.close();
      }
    });

    test('the metrics service still opens a database that applied a migration since retired', async () => {
      const old = await openDatabase({ ...options({}), sqliteFile: 'metrics.db',
        migrations: (d) => Object.fromEntries(Object.entries(metricsMigrations(d)).filter(([name]) => name <= '0002')) });
      for (const name of RETIRED_METRICS_MIGRATIONS) await sql`INSERT INTO schema_migrations (name, timestamp) VALUES (${name}, ${new Date(0).toISOString()})`.execute(old.db);
      await old.close();
      const upgraded = await openMetricsDatabase({ databaseUrl: storage.databaseUrl, dbSchema: storage.pgSchema, dataDir: storage.dataDir });
      await upgraded.close();
    });
  });
}
