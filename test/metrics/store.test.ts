import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../src/metrics/domain/metrics-store.js';
import { createAlertStore, type AlertTables } from '../../src/metrics/alerts/alert-store.js';
import { startRetentionSweep } from '../../src/metrics/domain/retention.js';
import { countHostReportsAfter } from '../../src/metrics/storage/engine/reader.js';
import { databaseConn } from '../../src/metrics/storage/engine/sql-conn.js';
import { createEngineMetricsStore } from '../../src/metrics/storage/engine-metrics-store.js';
import type { MetricsTables } from '../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../helpers/metrics.js';
import { ReportMetrics } from '../../src/metrics/domain/report-shapes.js';

const LIMITS = { perHost: 40, perTenant: 60, hostsPerTenant: 20 };

function report(tenantId: string, hostId: string, ts: number, metrics: Record<string, number> = { 'cpu.usage': ts % 100, 'memory.percent': 50 }): NewReport {
  return { tenantId, hostId, hostname: `${hostId}.example`, platform: 'linux', ts, metrics: ReportMetrics.of(Object.entries(metrics)) };
}

/** A host's raw reports in [from, to] (a budget large enough that nothing is bucketed). */
async function collect(store: MetricsStore, tenantId: string, hostId: string, from: number, to: number) {
  const s = await store.readHostSeries(tenantId, hostId, { from, to, points: 1_000_000, minmax: false });
  if (!s) return [];
  assert.equal(s.bucketMs, null);
  return s.timestamps.map((ts, i) => ({
    ts,
    metricIds: [...s.metrics].filter(([, col]) => col[i] !== null).map(([id]) => id),
    values: [...s.metrics].filter(([, col]) => col[i] !== null).map(([, col]) => col[i]!),
  }));
}

const openStore = (database: Database<MetricsTables>) => createEngineMetricsStore(database, { limits: LIMITS, now: Date.now });

for (const backend of BACKENDS) {
  describe(`metrics store on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      store = openStore(database);
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    test('stores a report once; the same host and ts again is a duplicate that changes nothing', async () => {
      const t = await newTenant(store);
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'h1', 1000, { 'cpu.usage': 1 })), { status: 'stored' });
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'h1', 1000, { 'cpu.usage': 2 })), { status: 'duplicate' });
      const rows = await collect(store, t.tenantId, 'h1', 0, 5000);
      assert.equal(rows.length, 1);
      assert.deepEqual(Array.from(rows[0]!.values), [1]);
    });

    test('a duplicate with another hostname, platform and a new metric changes none of them, in the head or once sealed', async () => {
      const t = await newTenant(store);
      const names = async () => (await database.db.selectFrom('metric_names').select('name').where('tenant_id', '=', t.tenantId).execute()).map((r) => r.name).sort();
      const hostNames = async () => (await database.db.selectFrom('host_metric_names').innerJoin('hosts', 'hosts.key', 'host_metric_names.host_key')
        .where('hosts.tenant_id', '=', t.tenantId).select('host_metric_names.metric_id').execute()).length;
      const changed = (ts: number) => ({ ...report(t.tenantId, 'hd', ts, { 'cpu.usage': 2, 'network.newmetric': 7 }), hostname: 'RENAMED', platform: 'windows' });
      for (const ts of [1_000, 5_000]) assert.deepEqual(await store.appendReport(report(t.tenantId, 'hd', ts, { 'cpu.usage': 1 })), { status: 'stored' });
      await store.flush();
      // 1,000 and 5,000 are sealed now; 9,000 stays in the head.
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'hd', 9_000_000_000, { 'cpu.usage': 1 })), { status: 'stored' });
      const before = { names: await names(), hostNames: await hostNames(), latest: await store.latestByHost(t.tenantId, 'hd') };
      for (const ts of [1_000, 9_000_000_000]) assert.deepEqual(await store.appendReport(changed(ts)), { status: 'duplicate' }, `ts ${ts}`);
      assert.deepEqual({ names: await names(), hostNames: await hostNames(), latest: await store.latestByHost(t.tenantId, 'hd') }, before);
      assert.deepEqual(before.latest.map((h) => [h.hostname, h.platform]), [['hd.example', 'linux']]);
      // A report that is no duplicate still renames the host and registers its names.
      assert.deepEqual(await store.appendReport(changed(9_000_010_000)), { status: 'stored' });
      assert.deepEqual((await store.latestByHost(t.tenantId, 'hd')).map((h) => [h.hostname, h.platform]), [['RENAMED', 'windows']]);
      assert.deepEqual(await names(), ['cpu.usage', 'network.newmetric']);
    });

    test('two stores on one database (two instances) ingesting the same new hosts in opposite orders lose nothing', async () => {
      const second = await openTestMetricsDatabase(storage);
      const other = openStore(second);
      try {
        for (let round = 0; round < 10; round++) {
          const t = await newTenant(store);
          // Names known beforehand, so only the new host rows are contended.
          await store.appendReport(report(t.tenantId, 'seed', 1));
          const hosts = Array.from({ length: 12 }, (_, i) => `h${i}`);
          const outcomes = await Promise.all([
            ...hosts.map((h, i) => store.appendReport(report(t.tenantId, h, 1000 + i))),
            ...[...hosts].reverse().map((h, i) => other.appendReport(report(t.tenantId, h, 5000 + i))),
          ]);
          assert.deepEqual(outcomes.map((o) => o.status), Array(24).fill('stored'), `round ${round}`);
          assert.deepEqual(await store.listHosts(t.tenantId), [...hosts, 'seed'].sort());
        }
      } finally {
        await other.close();
        await second.close();
      }
    });

    test('concurrent appends are all stored, duplicates within one batch counted once', async () => {
      const t = await newTenant(store);
      const outcomes = await Promise.all([
        ...Array.from({ length: 300 }, (_, i) => store.appendReport(report(t.tenantId, `h${i % 7}`, 10_000 + i))),
        store.appendReport(report(t.tenantId, 'h0', 10_000)),
      ]);
      assert.equal(outcomes.filter((o) => o.status === 'stored').length, 300);
      assert.equal(outcomes.filter((o) => o.status === 'duplicate').length, 1);
      let total = 0;
      for (let h = 0; h < 7; h++) total += (await collect(store, t.tenantId, `h${h}`, 0, 1e6)).length;
      assert.equal(total, 300);
      assert.deepEqual(await store.listHosts(t.tenantId), ['h0', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
    });

    test('range scans are inclusive, ascending and page through long ranges', async () => {
      const t = await newTenant(store);
      await Promise.all(Array.from({ length: 4_500 }, (_, i) => store.appendReport(report(t.tenantId, 'h', i * 10))));
      const all = await collect(store, t.tenantId, 'h', 0, 45_000);
      assert.equal(all.length, 4_500);
      assert.ok(all.every((r, i) => r.ts === i * 10));
      const some = await collect(store, t.tenantId, 'h', 100, 200);
      assert.deepEqual(some.map((r) => r.ts), [100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200]);
      assert.deepEqual(await collect(store, t.tenantId, 'nope', 0, 1e9), []);
    });

    test('metric names resolve per tenant only', async () => {
      const a = await newTenant(store);
      const b = await newTenant(store);
      await store.appendReport(report(a.tenantId, 'h', 1, { 'secret.metric': 1 }));
      const [row] = await collect(store, a.tenantId, 'h', 0, 10);
      const ids = Array.from(row!.metricIds);
      assert.deepEqual([...(await store.metricNames(a.tenantId, ids)).values()], ['secret.metric']);
      assert.equal((await store.metricNames(b.tenantId, ids)).size, 0);
      assert.deepEqual(await collect(store, b.tenantId, 'h', 0, 10), []);
      assert.equal(await store.hostExists(b.tenantId, 'h'), false);
    });

    test('past the per-host name limit a report is refused whole; others in its batch are unaffected', async () => {
      const t = await newTenant(store);
      const names = (n: number, prefix: string) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}.${i}`, i]));
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'h', 1, names(30, 'a'))), { status: 'stored' });
      const [over, ok] = await Promise.all([
        store.appendReport(report(t.tenantId, 'h', 2, { ...names(30, 'a'), ...names(11, 'b') })),
        store.appendReport(report(t.tenantId, 'h', 3, { ...names(30, 'a'), ...names(10, 'b') })),
      ]);
      assert.equal(over!.status, 'limit_exceeded');
      assert.match((over as { details: string }).details, /host h to 41 distinct metric names; the limit is 40/);
      assert.deepEqual(ok, { status: 'stored' });
      assert.deepEqual((await collect(store, t.tenantId, 'h', 0, 10)).map((r) => r.ts), [1, 3]);
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'h', 4, names(40, 'a'))), { status: 'limit_exceeded', details: 'the report would take host h to 50 distinct metric names; the limit is 40' });
    });

    test('a report a limit refused stores nothing: a later one of the same host and ts in its batch is stored, not a duplicate', async () => {
      const t = await newTenant(store);
      const names = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`m.${i}`, i]));
      assert.deepEqual((await store.appendReports([report(t.tenantId, 'd', 1, names(41)), report(t.tenantId, 'd', 1, names(2))])).map((o) => o.status),
        ['limit_exceeded', 'stored']);
      assert.deepEqual((await collect(store, t.tenantId, 'd', 0, 10)).map((r) => [r.ts, [...r.values].sort()]), [[1, [0, 1]]]);
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'd', 1, names(2))), { status: 'duplicate' });
    });

    test('past the per-tenant name limit a report is refused and no name is added', async () => {
      const t = await newTenant(store);
      const names = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}.${i}`, i]));
      assert.equal((await store.appendReport(report(t.tenantId, 'h1', 1, names('x', 35)))).status, 'stored');
      const refused = await store.appendReport(report(t.tenantId, 'h2', 1, names('y', 26)));
      assert.equal(refused.status, 'limit_exceeded');
      assert.match((refused as { details: string }).details, /tenant to 61 distinct metric names; the limit is 60/);
      assert.equal(await store.hostExists(t.tenantId, 'h2'), false);
      assert.equal((await store.appendReport(report(t.tenantId, 'h2', 1, names('y', 25)))).status, 'stored');
    });

    test('two stores on one database (two instances) each taking a report that fits the name limits alone but not together: one is refused', async () => {
      const second = await openTestMetricsDatabase(storage);
      const other = openStore(second);
      const names = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}.${i}`, i]));
      try {
        for (let round = 0; round < 8; round++) {
          const t = await newTenant(store);
          // Per host: h holds 30 names (limit 40); each report adds 6.
          await store.appendReport(report(t.tenantId, 'h', 1, names('a', 30)));
          await other.appendReport(report(t.tenantId, 'h', 2, names('a', 30)));
          const perHost = await Promise.all([
            store.appendReport(report(t.tenantId, 'h', 3, { ...names('a', 30), ...names('b', 6) })),
            other.appendReport(report(t.tenantId, 'h', 4, { ...names('a', 30), ...names('c', 6) })),
          ]);
          assert.deepEqual(perHost.map((o) => o.status).sort(), ['limit_exceeded', 'stored'], `round ${round}, per host`);
          // Per tenant: 54 names (limit 60); each report, of a new host, brings 4 new ones.
          await store.appendReport(report(t.tenantId, 'g', 1, names('d', 18)));
          await other.appendReport(report(t.tenantId, 'g', 2, names('d', 18)));
          const perTenant = await Promise.all([
            store.appendReport(report(t.tenantId, 'x', 1, names('e', 4))),
            other.appendReport(report(t.tenantId, 'y', 1, names('f', 4))),
          ]);
          assert.deepEqual(perTenant.map((o) => o.status).sort(), ['limit_exceeded', 'stored'], `round ${round}, per tenant`);
          const held = await database.db.selectFrom('metric_names').select((eb) => eb.fn.countAll<number | string>().as('n')).where('tenant_id', '=', t.tenantId).executeTakeFirstOrThrow();
          assert.equal(Number(held.n), 58, `round ${round}, tenant names`);
          const series = await store.readHostSeries(t.tenantId, 'h', { from: 0, to: 10, points: 100, minmax: false });
          assert.equal(series!.metrics.size, 36, `round ${round}, host names`);
        }
      } finally {
        await other.close();
        await second.close();
      }
    });

    test('past the host limit a report of a new host is refused and stores nothing, alone or in a batch; known hosts go on; retention frees places', async () => {
      const t = await newTenant(store);
      const refusal = (host: string, count: number) => ({ status: 'limit_exceeded', details: `the report's new host ${host} would take the tenant to ${count} hosts; the limit is 20` });
      // h0 holds only an old report, which the sweep below removes; h1..h19 and the batch's 21st host are new.
      const batch = [report(t.tenantId, 'h0', 1_000), ...Array.from({ length: 19 }, (_, i) => report(t.tenantId, `h${i + 1}`, 5_000)),
        report(t.tenantId, 'over', 5_000, { 'over.only': 1 }), report(t.tenantId, 'h1', 6_000)];
      const outcomes = await store.appendReports(batch);
      assert.deepEqual(outcomes.slice(0, 20).map((o) => o.status), Array(20).fill('stored'));
      assert.deepEqual(outcomes.slice(20), [refusal('over', 21), { status: 'stored' }]);
      assert.equal(await store.hostExists(t.tenantId, 'over'), false);
      const names = await database.db.selectFrom('metric_names').select('name').where('tenant_id', '=', t.tenantId).execute();
      assert.deepEqual(names.map((n) => n.name).sort(), ['cpu.usage', 'memory.percent'], 'the refused report added no name');
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'single', 7_000)), refusal('single', 21));
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'h19', 7_000)), { status: 'stored' });
      assert.equal((await store.listHosts(t.tenantId)).length, 20);
      await store.deleteBefore(2_000);
      assert.equal(await store.hostExists(t.tenantId, 'h0'), false);
      assert.deepEqual(await store.appendReports([report(t.tenantId, 'n1', 8_000), report(t.tenantId, 'n2', 8_000)]), [{ status: 'stored' }, refusal('n2', 21)]);
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'h0', 8_000)), refusal('h0', 21));
    });

    test('a name only hosts removed by retention held is free again, and counts anew when a host takes it up', async () => {
      const t = await newTenant(store);
      const names = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}.${i}`, i]));
      // 35 names on a host that retention removes, then 25 on a host that stays: 60, the limit.
      assert.equal((await store.appendReport(report(t.tenantId, 'gone', 1_000, names('old', 35)))).status, 'stored');
      assert.equal((await store.appendReport(report(t.tenantId, 'kept', 9_000, names('kept', 25)))).status, 'stored');
      assert.equal((await store.appendReport(report(t.tenantId, 'new', 9_000, names('fresh', 1)))).status, 'limit_exceeded', 'at the limit');
      await store.deleteBefore(5_000);
      assert.equal(await store.hostExists(t.tenantId, 'gone'), false);
      // Freed: 35 places, whether for names never seen or for names the removed host held.
      assert.deepEqual(await store.appendReport(report(t.tenantId, 'new', 9_000, { ...names('fresh', 20), ...names('old', 15) })), { status: 'stored' });
      const refused = await store.appendReport(report(t.tenantId, 'another', 9_000, names('old', 16)));
      assert.deepEqual(refused, { status: 'limit_exceeded', details: 'the report would take the tenant to 61 distinct metric names; the limit is 60' },
        'old.15 comes back as a name held again, and counts');
      assert.equal((await store.appendReport(report(t.tenantId, 'another', 9_000, { ...names('old', 15), ...names('kept', 25) }))).status, 'stored', 'names other hosts hold are free to share');
      const cpu = await store.readHostSeries(t.tenantId, 'new', { from: 0, to: 10_000, points: 10, minmax: false });
      assert.equal((await store.metricNames(t.tenantId, cpu!.metrics.keys())).size, 35, 'every name of the new host reads back');
    });

    test('new hosts sent at once, to one store or two on one database (two instances), never take a tenant past the host limit', async () => {
      const second = await openTestMetricsDatabase(storage);
      const other = openStore(second);
      try {
        for (let round = 0; round < 8; round++) {
          const t = await newTenant(store);
          // 17 hosts (limit 20): six new ones arrive at once, three on each store, for three places.
          await store.appendReports(Array.from({ length: 17 }, (_, i) => report(t.tenantId, `h${i}`, 1)));
          const outcomes = await Promise.all([
            ...['a', 'b', 'c'].map((h) => store.appendReport(report(t.tenantId, h, 2))),
            ...['x', 'y', 'z'].map((h) => other.appendReport(report(t.tenantId, h, 2))),
          ]);
          assert.deepEqual(outcomes.map((o) => o.status).sort(), [...Array(3).fill('limit_exceeded'), ...Array(3).fill('stored')], `round ${round}`);
          assert.equal((await store.listHosts(t.tenantId)).length, 20, `round ${round}`);
        }
      } finally {
        await other.close();
        await second.close();
      }
    });

    test('the aggregate point budget is the answer bound over the tenant\'s names, and readAggregate keeps to it', async () => {
      const t = await newTenant(store);
      assert.equal(await store.aggregatePointsLimit(t.tenantId), 2_000_000, 'no names yet');
      const names = Object.fromEntries(Array.from({ length: 35 }, (_, i) => [`m.${i}`, i]));
      assert.equal((await store.appendReport(report(t.tenantId, 'h', 1, names))).status, 'stored');
      const limit = await store.aggregatePointsLimit(t.tenantId);
      assert.equal(limit, Math.floor(2_000_000 / 35));
      // 10 s buckets from 0 (the finest the aggregate has): `points` buckets exactly.
      const read = (points: number) => store.readAggregate(t.tenantId, { from: 0, to: points * 10_000 - 1, points, minmax: false });
      assert.equal((await read(limit)).bucketMs, 10_000);
      await assert.rejects(read(limit + 1), (e: unknown) => (e as { code?: string }).code === 'limit_exceeded' && new RegExp(`ask for at most ${limit} points`).test((e as Error).message));
    });

    test('countHostReportsAfter counts the host\'s newer reports in the head, in whole blocks and inside an edge block; none of another host or tenant', async () => {
      const t = await newTenant(store);
      const other = await newTenant(store);
      const H = 3_600_000;
      // Three reports in each of two windows, sealed; two more in the head.
      for (const ts of [H + 1_000, H + 2_000, H + 3_000, 2 * H + 1_000, 2 * H + 2_000, 2 * H + 3_000]) await store.appendReport(report(t.tenantId, 'c', ts));
      await store.appendReport(report(t.tenantId, 'c-other', 9 * H));
      await store.appendReport(report(other.tenantId, 'c', 9 * H));
      await store.flush();
      const sealed = await databaseConn(database).all<{ rows: number | string }>(
        'SELECT b.rows FROM blocks b JOIN hosts h ON h.key = b.host_key WHERE h.tenant_id = ? AND h.host_id = ? ORDER BY b.window_start', [t.tenantId, 'c']);
      assert.deepEqual(sealed.map((b) => Number(b.rows)), [3, 3], 'both windows are sealed');
      const now = Date.now();
      for (const ts of [now - 2_000, now - 1_000]) await store.appendReport(report(t.tenantId, 'c', ts));
      const conn = databaseConn(database);
      const after = (ts: number) => countHostReportsAfter(conn, t.tenantId, 'c', ts);
      assert.equal(await after(0), 8);
      assert.equal(await after(H + 2_000), 6, 'inside the first block: one of its rows, the whole second block, the head');
      assert.equal(await after(H + 3_000), 5);
      assert.equal(await after(2 * H + 2_500), 3);
      assert.equal(await after(now - 2_000), 1, 'in the head');
      assert.equal(await after(now - 1_000), 0);
      assert.equal(await countHostReportsAfter(conn, t.tenantId, 'nobody', 0), 0);
      assert.equal(await countHostReportsAfter(conn, other.tenantId, 'c', 0), 1, 'another tenant\'s host of the same id is its own');
    });

    test('latestByHost keeps the newest report even when an older one arrives later', async () => {
      const t = await newTenant(store);
      await store.appendReport({ ...report(t.tenantId, 'b', 2000, { 'cpu.usage': 20, 'memory.percent': 40 }), hostname: 'beta' });
      await store.appendReport({ ...report(t.tenantId, 'b', 1000, { 'cpu.usage': 10, 'memory.percent': 30 }), hostname: 'old-name' });
      await store.appendReport({ ...report(t.tenantId, 'a', 500, { 'disk./.percent': 3 }), hostname: 'alpha' });
      assert.deepEqual(await store.latestByHost(t.tenantId), [
        { hostId: 'a', hostname: 'alpha', platform: 'linux', lastTs: 500, cpuUsage: null, memoryPercent: null, diskPercent: 3, intervalMs: null },
        { hostId: 'b', hostname: 'beta', platform: 'linux', lastTs: 2000, cpuUsage: 20, memoryPercent: 40, diskPercent: null, intervalMs: 1000 },
      ]);
    });

    test('hostname and platform are the newest report\'s: an older report arriving later leaves them, in the head, once sealed, or in one batch', async () => {
      const t = await newTenant(store);
      const named = (ts: number, hostname: string, platform = 'linux') => ({ ...report(t.tenantId, 'n', ts), hostname, platform });
      const shown = async () => (await store.latestByHost(t.tenantId, 'n')).map((h) => [h.hostname, h.platform]);
      for (let i = 0; i < 10; i++) assert.deepEqual(await store.appendReport(named(1_000 + i * 60_000, 'web-new')), { status: 'stored' });
      // From before the machine was renamed, as a spooled backlog sends it.
      assert.deepEqual(await store.appendReport(named(1_000 + 4.5 * 60_000, 'web-old', 'windows')), { status: 'stored' });
      assert.deepEqual(await shown(), [['web-new', 'linux']], 'in the head');
      await store.flush();
      assert.deepEqual(await store.appendReport(named(1_000 + 5.5 * 60_000, 'web-old', 'windows')), { status: 'stored' });
      assert.deepEqual(await shown(), [['web-new', 'linux']], 'once sealed');
      // One batch: its newest report keeps the name (which it does not change), its older one does not take it.
      assert.deepEqual(await store.appendReports([named(20 * 60_000, 'web-new'), named(15 * 60_000, 'web-old')]), [{ status: 'stored' }, { status: 'stored' }]);
      assert.deepEqual(await shown(), [['web-new', 'linux']], 'in one batch');
      // A newer report renames.
      assert.deepEqual(await store.appendReport(named(21 * 60_000, 'web-next')), { status: 'stored' });
      assert.deepEqual(await shown(), [['web-next', 'linux']]);
    });

    test('latestByHost: the fullest disk, and the gap between the two latest reports as the interval', async () => {
      const t = await newTenant(store);
      await store.appendReport(report(t.tenantId, 'h', 10_000, { 'disk./.percent': 30, 'disk./data.percent': 70 }));
      await store.appendReport(report(t.tenantId, 'h', 25_000, { 'disk./.percent': 31, 'disk./data.percent': 12 }));
      await store.appendReport(report(t.tenantId, 'h', 5_000, { 'disk./.percent': 99 }));
      const [h] = await store.latestByHost(t.tenantId);
      assert.equal(h!.diskPercent, 31);
      assert.equal(h!.intervalMs, 15_000);
    });

    test('retention deletes older reports, hosts left with none and incidents that ended before it; the sweep reports what it removed', async () => {
      const t = await newTenant(store);
      const day = 86_400_000;
      const now = 100 * day;
      await store.appendReport(report(t.tenantId, 'stale', now - 40 * day));
      await store.appendReport(report(t.tenantId, 'live', now - 31 * day));
      await store.appendReport(report(t.tenantId, 'live', now - 29 * day));
      const alerts = createAlertStore(database.db.withTables<AlertTables>(), databaseConn(database), countHostReportsAfter);
      const incident = (name: string, lastSeenAt: number, resolvedAt: number | null) => ({
        tenantId: t.tenantId, hostId: 'live', fingerprint: name, name, severity: 'warning' as const, message: null, labels: {}, value: null,
        threshold: null, startsAt: now - 35 * day, lastSeenAt, resolvedAt, createdAt: now - 35 * day, routes: {}, resolvePending: false,
      });
      await alerts.forHost(t.tenantId, 'live', (host) => host.record({ opened: [incident('ended', now - 33 * day, now - 32 * day), incident('firing', now - 29 * day, null)], updated: [] }));
      const result = await new Promise<unknown>((resolve) => {
        const stop = startRetentionSweep({ store, alerts }, { retentionMs: 30 * day, intervalMs: 60_000, now: () => now, onSweep: (r) => { void stop().then(() => resolve(r)); } });
      });
      // Both stale reports went; on every backend the sweep counts them, plus any an earlier test's tenant left that old.
      assert.ok(typeof result === 'object' && result !== null && 'reports' in result, JSON.stringify(result));
      const { reports, hosts, incidents } = result as { reports: number; hosts: number; incidents: number };
      assert.ok(reports >= 2 && hosts >= 1, JSON.stringify(result));
      assert.equal(incidents, 1);
      assert.deepEqual((await alerts.list(t.tenantId, { from: 0, to: now, limit: 10 })).map((a) => a.name), ['firing']);
      assert.deepEqual(await store.listHosts(t.tenantId), ['live']);
      assert.deepEqual((await collect(store, t.tenantId, 'live', 0, now)).map((r) => r.ts), [now - 29 * day]);
      assert.equal((await store.appendReport(report(t.tenantId, 'stale', now))).status, 'stored');
    });

    test('a report the database refuses fails alone: the other reports of its group commit, other tenants\' too, are stored', async () => {
      const victim = await newTenant(store);
      const attacker = await newTenant(store);
      // What each database refuses (the HTTP edge refuses both long before; this is the store's own guard).
      const poison = backend === 'sqlite' ? 'a\ud800' : 'a\u0000b';
      const sends = Array.from({ length: 200 }, (_, i) => store.appendReport(report(victim.tenantId, `v${i % 10}`, 50_000 + i)));
      const bad = store.appendReport(report(attacker.tenantId, 'evil', 50_000, { [poison]: 1 }));
      const outcomes = await Promise.all(sends);
      await assert.rejects(bad);
      assert.ok(outcomes.every((o) => o.status === 'stored'), JSON.stringify(outcomes.filter((o) => o.status !== 'stored')));
      assert.equal((await store.listHosts(victim.tenantId)).length, 10);
      assert.deepEqual(await store.listHosts(attacker.tenantId), []);
    });

    test('past the bound of reports waiting for the disk, appends are refused with 503 and a retry hint, and nothing is half stored', async () => {
      const small = createEngineMetricsStore(database, { limits: LIMITS, now: Date.now, writer: { maxQueued: 20 } });
      try {
        const t = await newTenant(small);
        const first = small.appendReports(Array.from({ length: 15 }, (_, i) => report(t.tenantId, 'q', 90_000 + i)));
        const refused = small.appendReports(Array.from({ length: 10 }, (_, i) => report(t.tenantId, 'q', 95_000 + i)));
        await assert.rejects(refused, (e: unknown) => (e as { code?: string; extra?: { retry_after?: number } }).code === 'unavailable'
          && (e as { extra: { retry_after: number } }).extra.retry_after > 0);
        assert.equal((await first).length, 15);
        assert.deepEqual((await collect(small, t.tenantId, 'q', 0, 100_000)).map((r) => r.ts), Array.from({ length: 15 }, (_, i) => 90_000 + i));
      } finally {
        await small.close();
      }
    });

    test('an append withdrawn (its client went away) before it reaches the writer is refused and stores nothing', async () => {
      const t = await newTenant(store);
      const ac = new AbortController();
      const withdrawn = store.appendReports([report(t.tenantId, 'gone', 1_000), report(t.tenantId, 'gone', 2_000)], ac.signal);
      ac.abort();
      await assert.rejects(withdrawn, (e: unknown) => (e as { code?: string }).code === 'unavailable' && /nothing was stored/.test(String(e)));
      await assert.rejects(store.appendReport(report(t.tenantId, 'gone', 3_000), ac.signal), /nothing was stored/);
      await store.flush();
      assert.equal(await store.hostExists(t.tenantId, 'gone'), false);
    });

    test('appends of one turn share a message: one withdrawn or failing while read leaves the others intact', async () => {
      const t = await newTenant(store);
      const ac = new AbortController();
      const before = store.appendReports([report(t.tenantId, 'kept', 1_000)]);
      const withdrawn = store.appendReports([report(t.tenantId, 'gone', 1_000), report(t.tenantId, 'gone', 2_000)], ac.signal);
      ac.abort();
      function* failing() {
        yield report(t.tenantId, 'half', 1_000);
        throw new Error('the body ended badly');
      }
      const broken = store.appendReports(failing());
      const after = store.appendReports([report(t.tenantId, 'kept', 2_000), report(t.tenantId, 'other', 3_000)]);
      await assert.rejects(withdrawn, /nothing was stored/);
      await assert.rejects(broken, /the body ended badly/);
      assert.deepEqual([...await before, ...await after].map((o) => o.status), ['stored', 'stored', 'stored']);
      await store.flush();
      assert.equal(await store.hostExists(t.tenantId, 'gone'), false);
      assert.equal(await store.hostExists(t.tenantId, 'half'), false);
      assert.deepEqual((await collect(store, t.tenantId, 'kept', 0, 10_000)).map((r) => r.ts), [1_000, 2_000]);
      assert.deepEqual((await collect(store, t.tenantId, 'other', 0, 10_000)).map((r) => r.ts), [3_000]);
    });

    test('an append withdrawn while it waits behind another commit is not committed; the one committing completes', async () => {
      const t = await newTenant(store);
      // Each larger than one commit's batch, and as many as commits run at once (4 on PostgreSQL), so the small
      // append waits in the writer's queue while they commit.
      const bigs = Array.from({ length: 4 }, (_, k) => store.appendReports(Array.from({ length: 2_500 }, (_, i) => report(t.tenantId, 'busy', 10_000 + (k * 2_500 + i) * 10))));
      const ac = new AbortController();
      const waiting = store.appendReports([report(t.tenantId, 'late', 5_000)], ac.signal);
      // Both have left for the writer thread (sent on the next turn) before the client goes away.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setTimeout(resolve, 10));
      ac.abort();
      await assert.rejects(waiting, /nothing was stored/);
      assert.equal((await Promise.all(bigs)).flat().filter((o) => o.status === 'stored').length, 10_000);
      await store.flush();
      assert.equal(await store.hostExists(t.tenantId, 'late'), false);
      assert.equal((await collect(store, t.tenantId, 'busy', 0, 200_000)).length, 10_000);
    });

    test('retention deleting a host between two appends of it (two instances): the append re-creates the host, nothing is lost', async () => {
      const t = await newTenant(store);
      const second = await openTestMetricsDatabase(storage);
      const sweeper = openStore(second);
      try {
        const hour = 3_600_000;
        for (let i = 0; i < 8; i++) {
          // The host holds only an old report (whose hour the sweep drops), and this store's writer has its key cached.
          const old = (i + 1) * 10 * hour;
          const fresh = old + 3 * hour;
          assert.deepEqual(await store.appendReport(report(t.tenantId, 'r', old)), { status: 'stored' });
          const [gone, appended] = await Promise.all([sweeper.deleteBefore(fresh), store.appendReport(report(t.tenantId, 'r', fresh))]);
          assert.deepEqual(appended, { status: 'stored' });
          assert.ok(gone.reports >= 1);
          assert.deepEqual((await collect(store, t.tenantId, 'r', 0, 1_000 * hour)).map((r) => r.ts), [fresh]);
        }
      } finally {
        await sweeper.close();
        await second.close();
      }
    });

    test('the aggregate counts the hosts with a report in the range, in the head or sealed: not a host whose block only spans it', async () => {
      // One fold thread: a window's blocks are folded partly on a thread, partly here (fold-pool.ts).
      const folding = createEngineMetricsStore(database, { limits: LIMITS, now: Date.now, foldThreads: 1 });
      try {
        const t = await newTenant(folding);
        const hour = 3_600_000;
        const w = 20 * hour;
        const min = 60_000;
        // gap-* report at :00 and :50, busy-* at :25, all in one window.
        const reports = [0, 1, 2, 3].flatMap((i) => [report(t.tenantId, `gap-${i}`, w + i), report(t.tenantId, `gap-${i}`, w + 50 * min + i), report(t.tenantId, `busy-${i}`, w + 25 * min + i)]);
        reports.push(report(t.tenantId, 'late', w + 40 * min), report(t.tenantId, 'late', w + 3 * hour));
        assert.ok((await folding.appendReports(reports)).every((o) => o.status === 'stored'));
        const hosts = async () => {
          const out: number[] = [];
          for (const [a, b] of [[20, 30], [45, 55], [20, 120], [5, 45]] as const) {
            out.push((await folding.readAggregate(t.tenantId, { from: w + a * min, to: w + b * min, points: 10, minmax: false })).hosts);
          }
          return out;
        };
        const expected = [4, 4, 9, 5];
        assert.deepEqual(await hosts(), expected, 'in the head');
        await folding.flush();
        assert.deepEqual(await hosts(), expected, 'sealed');
      } finally {
        await folding.close();
      }
    });

    test('a fleet bucket whose values add up past the float64 range both ways has no mean, read raw or from the tenant rollup', async () => {
      const t = await newTenant(store);
      const hour = 3_600_000;
      const w = 30 * hour;
      const min = 60_000;
      // In one hour: a at +1.7e308 twice, b at -1.7e308 twice (minute cells of +Infinity and -Infinity), c at 5.
      const reports = [
        report(t.tenantId, 'a', w + min, { 'net.z': 1.7e308 }), report(t.tenantId, 'a', w + min + 10_000, { 'net.z': 1.7e308 }),
        report(t.tenantId, 'b', w + 10 * min, { 'net.z': -1.7e308 }), report(t.tenantId, 'b', w + 10 * min + 10_000, { 'net.z': -1.7e308 }),
        report(t.tenantId, 'c', w + 20 * min, { 'net.z': 5 }),
      ];
      assert.ok((await store.appendReports(reports)).every((o) => o.status === 'stored'));
      // As the answer's JSON has it: a mean that is no finite number is null.
      const hourly = async () => {
        const fleet = await store.readAggregate(t.tenantId, { from: w, to: w + hour - 1, points: 1, minmax: true });
        return JSON.parse(JSON.stringify({ mean: [...fleet.metrics.values()], min: [...fleet.min!.values()], max: [...fleet.max!.values()] })) as unknown;
      };
      const expected = { mean: [[null]], min: [[-1.7e308]], max: [[1.7e308]] };
      assert.deepEqual(await hourly(), expected, 'raw, from the head');
      await store.flush();
      assert.deepEqual(await hourly(), expected, 'from the tenant rollup');
    });

    test('an aggregate answer past the bound of metrics x buckets is refused up front (limit_exceeded), a smaller budget is served', async () => {
      const t = await newTenant(store);
      const wide = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 10_000 }, now: Date.now });
      try {
        await wide.appendReport(report(t.tenantId, 'w', 1_000_000, Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`m.${i}`, i]))));
      } finally {
        await wide.close();
      }
      // 10,000 buckets of 10 s (the aggregate's unit: a width that is not a multiple of it is rounded up).
      const q = { from: 0, to: 10_000 * 10_000 - 1, points: 10_000, minmax: false };
      await assert.rejects(store.readAggregate(t.tenantId, q), (e: unknown) => (e as { code?: string }).code === 'limit_exceeded' && /at most 8000 points/.test(String((e as Error).message)));
      assert.equal((await store.readAggregate(t.tenantId, { ...q, points: 8_000 })).hosts, 1);
    });

    test('tokens: listed without secrets, found by hash while active, revoked once', async () => {
      const t = await newTenant(store, `acme-${backend}`);
      const list = await store.listTokens();
      const mine = list.find((x) => x.id === t.tokenId);
      assert.deepEqual(Object.keys(mine!).sort(), ['createdAt', 'id', 'revokedAt', 'tenantId', 'tenantName']);
      assert.equal(await store.revokeToken(t.tokenId, 5), true);
      assert.equal(await store.revokeToken(t.tokenId, 6), false);
      assert.equal((await store.listTokens()).find((x) => x.id === t.tokenId)!.revokedAt, 5);
      await assert.rejects(store.createTenant({ id: 'other', name: `acme-${backend}`, createdAt: 1 }), /conflict/);
    });
  });
}
