import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import assert from 'node:assert/strict';
import { openDatabase, type Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { metricsMigrations } from '../../../src/metrics/storage/migrations/index.js';
import { encodeSamples } from '../../../src/metrics/storage/sample-codec.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

const T0 = Date.UTC(2025, 5, 1);
const open = openTestMetricsDatabase;
const storeOn = (d: Database<MetricsTables>) => createEngineMetricsStore(d, { limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, now: Date.now, writer: { sealIntervalMs: 0 } });

async function rawTimestamps(store: MetricsStore, tenantId: string, hostId: string): Promise<number[]> {
  return (await store.readHostSeries(tenantId, hostId, { from: 0, to: T0 + 100 * 3_600_000, points: 1_000_000, minmax: false }))?.timestamps ?? [];
}

for (const backend of BACKENDS) {
  describe(`storage engine upgrades and instances on ${backend}`, () => {
    let storage: TestStorage;
    before(async () => { storage = await freshStorage(backend); });
    after(() => storage.cleanup());

    test('a database written by the row-per-report layout is upgraded in place on start and loses no report', async () => {
      // The layout before the engine: migrations up to 0002, a reports row per report, latest values on hosts.
      const old = await openDatabase<MetricsTables>({
        databaseUrl: storage.databaseUrl, pgSchema: storage.pgSchema, dataDir: storage.dataDir, sqliteFile: 'metrics.db',
        migrations: (d) => Object.fromEntries(Object.entries(metricsMigrations(d)).filter(([name]) => name <= '0002')),
      });
      await old.db.insertInto('tenants').values({ id: 'ten-old', name: 'old', created_at: 1 }).execute();
      await old.db.insertInto('metric_names').values([{ tenant_id: 'ten-old', name: 'cpu.usage' }, { tenant_id: 'ten-old', name: 'memory.percent' }]).execute();
      const ids = await old.db.selectFrom('metric_names').select(['id', 'name']).execute();
      const id = (n: string) => ids.find((r) => r.name === n)!.id;
      // The old hosts row carried the latest values, which the upgrade drops.
      await sql`INSERT INTO hosts (tenant_id, host_id, hostname, platform, last_ts, cpu_usage, memory_percent) VALUES ('ten-old', 'legacy', 'legacy', 'linux', ${T0}, 1, 2)`.execute(old.db);
      const [host] = await old.db.selectFrom('hosts').select('key').execute();
      const rows = Array.from({ length: 900 }, (_, i) => ({ host_key: host!.key, ts: T0 + i * 10_000, samples: encodeSamples([id('cpu.usage'), id('memory.percent')], [i / 10, 50]) }));
      for (let i = 0; i < rows.length; i += 100) await old.db.insertInto('reports').values(rows.slice(i, i + 100)).execute();
      await old.close();

      const database = await open(storage);
      const store = storeOn(database);
      try {
        const expected = rows.map((r) => r.ts);
        assert.deepEqual(await rawTimestamps(store, 'ten-old', 'legacy'), expected, 'readable at once, from the head');
        await store.flush();
        assert.deepEqual(await rawTimestamps(store, 'ten-old', 'legacy'), expected, 'and after being sealed');
        const agg = await store.readAggregate('ten-old', { from: T0, to: T0 + 3 * 3_600_000 - 1, points: 3, minmax: false });
        const names = await store.metricNames('ten-old', agg.metrics.keys());
        const cpu = agg.metrics.get([...names].find(([, n]) => n === 'cpu.usage')![0])!;
        assert.deepEqual(cpu, [17.95, 53.95, 80.95], 'hour means of i/10 over 0..359, 360..719, 720..899');
      } finally {
        await store.close();
        await database.close();
      }
    });

    test('a read while another instance seals never misses the rows being moved from the head into a block', async () => {
      const d1 = await open(storage);
      const d2 = await open(storage);
      const writer = storeOn(d1);
      const reader = storeOn(d2);
      try {
        const { tenantId } = await newTenant(writer);
        const windows = 12;
        for (let w = 0; w < windows; w++) {
          await writer.appendReports(Array.from({ length: 360 }, (_, i) => ({ tenantId, hostId: 'r', hostname: 'r', platform: 'linux', ts: T0 + w * 3_600_000 + i * 10_000, metrics: ReportMetrics.of([['cpu.usage', i]]) })));
        }
        const sealing = writer.flush();
        const counts: number[] = [];
        let done = false;
        void sealing.then(() => { done = true; });
        while (!done) {
          counts.push((await rawTimestamps(reader, tenantId, 'r')).length);
          // A turn of the event loop: the writer's answer (and so the end of sealing) arrives as an event.
          await new Promise((resolve) => setImmediate(resolve));
        }
        await sealing;
        counts.push((await rawTimestamps(reader, tenantId, 'r')).length);
        assert.ok(counts.length > 1);
        assert.deepEqual([...new Set(counts)], [windows * 360], 'every read saw every report exactly once');
      } finally {
        await writer.close();
        await reader.close();
        await d1.close();
        await d2.close();
      }
    });

    test('two instances appending and sealing the same hosts at once store every report once', async () => {
      const d1 = await open(storage);
      const d2 = await open(storage);
      const s1 = storeOn(d1);
      const s2 = storeOn(d2);
      try {
        const { tenantId } = await newTenant(s1);
        const reports: NewReport[] = [];
        for (let i = 0; i < 2_000; i++) {
          for (const hostId of ['x1', 'x2', 'x3']) reports.push({ tenantId, hostId, hostname: hostId, platform: 'linux', ts: T0 + i * 10_000 + hostId.length, metrics: ReportMetrics.of([['cpu.usage', i % 97]]) });
        }
        // Every report goes to both instances (a client retrying through a load balancer), in chunks, while both seal.
        const sends: Array<Promise<unknown>> = [];
        for (let i = 0; i < reports.length; i += 300) {
          const chunk = reports.slice(i, i + 300);
          sends.push(s1.appendReports(chunk).then(() => s1.flush()), s2.appendReports([...chunk].reverse()).then(() => s2.flush()));
        }
        await Promise.all(sends);
        await Promise.all([s1.flush(), s2.flush()]);
        for (const hostId of ['x1', 'x2', 'x3']) {
          const expected = reports.filter((r) => r.hostId === hostId).map((r) => r.ts);
          assert.deepEqual(await rawTimestamps(s1, tenantId, hostId), expected);
          assert.deepEqual(await rawTimestamps(s2, tenantId, hostId), expected);
        }
        const agg = await s2.readAggregate(tenantId, { from: T0, to: T0 + 2_000 * 10_000, points: 1, minmax: true });
        const expectedMean = reports.reduce((x, r) => x + r.metrics.get('cpu.usage')!, 0) / reports.length;
        const [value] = [...agg.metrics.values()][0]!;
        assert.ok(Math.abs(value! - expectedMean) < 1e-9, `aggregate ${value} vs ${expectedMean}: nothing counted twice`);
      } finally {
        await s1.close();
        await s2.close();
        await d1.close();
        await d2.close();
      }
    });
  });
}

describe('the SQLite head becomes a rowid table (migration 0006)', () => {
  let storage: TestStorage;
  before(async () => { storage = await freshStorage('sqlite'); });
  after(() => storage.cleanup());

  test('head rows written in the clustered layout survive the upgrade, and a report already there is still a duplicate', async () => {
    const old = await openDatabase<MetricsTables>({
      databaseUrl: undefined, pgSchema: storage.pgSchema, dataDir: storage.dataDir, sqliteFile: 'metrics.db', sqlitePageSize: 1024,
      migrations: (d) => Object.fromEntries(Object.entries(metricsMigrations(d)).filter(([name]) => name <= '0005')),
    });
    const tableSql = async (d: Database<MetricsTables>) => (await sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE name = 'reports'`.execute(d.db)).rows[0]!.sql;
    assert.match(await tableSql(old), /without rowid/i);
    await old.db.insertInto('tenants').values({ id: 'ten-h', name: 'h', created_at: 1 }).execute();
    await old.db.insertInto('metric_names').values({ tenant_id: 'ten-h', name: 'cpu.usage' }).execute();
    const [{ id }] = await old.db.selectFrom('metric_names').select('id').execute() as [{ id: number }];
    await sql`INSERT INTO hosts (tenant_id, host_id, hostname, platform, last_ts) VALUES ('ten-h', 'h1', 'h1', 'linux', ${T0})`.execute(old.db);
    const [host] = await old.db.selectFrom('hosts').select('key').execute();
    await old.db.insertInto('host_metric_names').values({ host_key: host!.key, metric_id: id }).execute();
    // Reverse time order on purpose: the copy must not depend on the order rows come in.
    const rows = Array.from({ length: 500 }, (_, i) => ({ host_key: host!.key, ts: T0 + (499 - i) * 10_000, samples: encodeSamples([id], [i]) }));
    for (let i = 0; i < rows.length; i += 100) await old.db.insertInto('reports').values(rows.slice(i, i + 100)).execute();
    await old.close();

    const database = await open(storage);
    const store = storeOn(database);
    try {
      assert.doesNotMatch(await tableSql(database), /without rowid/i);
      const index = await sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'reports'`.execute(database.db);
      assert.deepEqual(index.rows.map((r) => r.sql), ['CREATE UNIQUE INDEX reports_host_ts ON reports (host_key, ts)']);
      assert.deepEqual(await rawTimestamps(store, 'ten-h', 'h1'), rows.map((r) => r.ts).sort((a, b) => a - b));
      const again: NewReport = { tenantId: 'ten-h', hostId: 'h1', hostname: 'h1', platform: 'linux', ts: T0 + 10_000, metrics: ReportMetrics.of([['cpu.usage', 1]]) };
      assert.deepEqual(await store.appendReport(again), { status: 'duplicate' });
      assert.deepEqual(await store.appendReport({ ...again, ts: T0 + 500 * 10_000 }), { status: 'stored' });
    } finally {
      await store.close();
      await database.close();
    }
  });
});
