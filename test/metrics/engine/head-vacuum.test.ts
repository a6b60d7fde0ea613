import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

/**
 * PostgreSQL only (SQLite hands freed pages back once reports stop:
 * sqlite-vacuum.test.ts): the head is a queue, so a seal pass that moved rows into blocks
 * vacuums it, making the sealed rows' space reusable before autovacuum's next
 * look, which comes once a minute at best. In a database of its own: another
 * test file's open transaction in a shared one would keep the rows VACUUM
 * is asserted to have removed.
 */
for (const backend of BACKENDS.filter((b) => b === 'postgres')) {
  describe(`the head table after seals on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    const T0 = Date.UTC(2026, 10, 20, 0);
    before(async () => {
      storage = await freshStorage(backend, { ownDatabase: true });
      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 10_000 }, now: () => T0 + 3 * WINDOW_MS, writer: { sealIntervalMs: 0 } });
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    const headStats = async () => {
      const r = await database.pgPool!.query<{ vacuums: string; dead: string }>(
        `SELECT vacuum_count AS vacuums, n_dead_tup AS dead FROM pg_stat_user_tables WHERE relname = 'reports' AND schemaname = $1`, [storage.pgSchema]);
      return { vacuums: Number(r.rows[0]!.vacuums), dead: Number(r.rows[0]!.dead) };
    };

    test('a pass that sealed head rows vacuums the head table; its sealed rows leave no dead tuples behind', async () => {
      const { tenantId } = await newTenant(store);
      const reports = Array.from({ length: 360 }, (_, i) => ({ tenantId, hostId: 'h', hostname: 'h', platform: 'linux', ts: T0 + i * 10_000, metrics: ReportMetrics.of([['cpu.usage', i % 100]]) }));
      assert.ok((await store.appendReports(reports)).every((o) => o.status === 'stored'));
      assert.equal((await headStats()).vacuums, 0);
      await store.flush();
      const [{ n }] = (await database.pgPool!.query<{ n: string }>('SELECT COUNT(*) AS n FROM reports')).rows as [{ n: string }];
      assert.equal(Number(n), 0, 'every report was sealed');
      const after = await headStats();
      assert.equal(after.vacuums, 1);
      assert.equal(after.dead, 0);
    });
  });
}
