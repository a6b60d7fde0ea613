// latestByHost against the reports themselves, with hosts whose two newest rows sit in every place they can, in three statements (four with blocks to decode).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import type { HostLatest, MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { latestByHost } from '../../../src/metrics/storage/engine/latest.js';
import { TailRows } from '../../../src/metrics/storage/engine/tail-rows.js';
import { databaseConn, type SqlConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

const T0 = Date.UTC(2026, 10, 20, 0);
const MIN = 60_000;
/** Windows 0-2 are closed (sealed by a flush); window 3 is open, so its reports stay in the head. */
const NOW = T0 + 3 * WINDOW_MS + 30 * MIN;

function report(tenantId: string, hostId: string, ts: number): NewReport {
  const metrics = ReportMetrics.of([
    ['cpu.usage', (ts / 1000) % 97], ['memory.percent', (ts / 7000) % 89],
    ['disk./.percent', (ts / 3000) % 50], ['disk./data.percent', 50 - ((ts / 5000) % 40)],
  ]);
  return { tenantId, hostId, hostname: `${hostId}.example`, platform: 'linux', ts, metrics };
}

/** Reports every `step` ms in [from, to). */
function every(tenantId: string, hostId: string, from: number, to: number, step: number): NewReport[] {
  const out: NewReport[] = [];
  for (let ts = from; ts < to; ts += step) out.push(report(tenantId, hostId, ts));
  return out;
}

/** What latestByHost must say, from every report the host ever sent. */
function expected(reports: NewReport[]): HostLatest[] {
  const byHost = new Map<string, NewReport[]>();
  for (const r of reports) byHost.set(r.hostId, [...(byHost.get(r.hostId) ?? []), r]);
  return [...byHost.values()].map((rs) => {
    const [last, previous] = [...rs].sort((a, b) => b.ts - a.ts);
    const m = last!.metrics;
    return {
      hostId: last!.hostId, hostname: last!.hostname, platform: 'linux', lastTs: last!.ts,
      cpuUsage: m.get('cpu.usage')!, memoryPercent: m.get('memory.percent')!,
      diskPercent: Math.max(m.get('disk./.percent')!, m.get('disk./data.percent')!),
      intervalMs: previous ? last!.ts - previous.ts : null,
    };
  }).sort((a, b) => (a.hostname < b.hostname ? -1 : 1));
}

/** A SqlConn that counts the statements run through it, and the bytes of the blobs they return. */
function counting(conn: SqlConn): { conn: SqlConn; statements: () => number; blobBytes: () => number } {
  let n = 0;
  let bytes = 0;
  const all: SqlConn['all'] = async (text, params) => {
    n++;
    const rows = await conn.all(text, params);
    for (const row of rows as Record<string, unknown>[]) for (const v of Object.values(row)) if (v instanceof Uint8Array) bytes += v.byteLength;
    return rows as never;
  };
  return {
    conn: { ...conn, all, run: (text, params) => { n++; return conn.run(text, params); } },
    statements: () => n,
    blobBytes: () => bytes,
  };
}

for (const backend of BACKENDS) {
  describe(`latestByHost on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    let conn: SqlConn;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, now: () => NOW, writer: { sealIntervalMs: 0 } });
      conn = databaseConn(database);
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    async function latest(tenantId: string, tails?: TailRows) {
      const c = counting(conn);
      const hosts = await latestByHost(c.conn, tenantId, { nameOf: (ids) => store.metricNames(tenantId, ids), ...(tails ? { tails } : {}) });
      return { hosts, statements: c.statements(), blobBytes: c.blobBytes() };
    }

    test('finds the two newest reports in the head, in sealed blocks or across both, in three statements and one for block data', async () => {
      const t = (await newTenant(store)).tenantId;
      const other = (await newTenant(store)).tenantId;
      const w = (i: number) => T0 + i * WINDOW_MS;
      const sent = [
        // Reporting now: windows 0-2 sealed, its newest rows in the head.
        ...every(t, 'live', w(0), NOW - 5_000, 10_000),
        // Quiet since window 0: both rows in its only block.
        ...every(t, 'quiet', w(0), w(0) + 30 * MIN, 10_000),
        // Its newest block holds one row: the row before it is in the block before.
        ...every(t, 'tail', w(0), w(0) + 20 * MIN, 10_000), report(t, 'tail', w(1) + 5 * MIN),
        // One head row; the row before it is sealed.
        ...every(t, 'resumed', w(0), w(1), 30_000), report(t, 'resumed', w(3) + 10 * MIN),
        // Only ever one report.
        report(t, 'lone', w(3) + 1_000),
        // Another tenant's newer host is not this tenant's.
        ...every(other, 'live', w(3), NOW, 10_000),
      ];
      const batches = Math.ceil(sent.length / 1_000);
      for (let i = 0; i < batches; i++) assert.ok((await store.appendReports(sent.slice(i * 1_000, (i + 1) * 1_000))).every((o) => o.status === 'stored'));
      const sealedLater = every(t, 'late', w(0), w(3), 10_000);
      assert.ok((await store.appendReports(sealedLater)).every((o) => o.status === 'stored'));
      await store.flush();
      // Late reports into a sealed window wait in the head, older than the host's sealed rows.
      const late = [report(t, 'late', w(0) + 1_234), report(t, 'late', w(0) + 2_345)];
      assert.ok((await store.appendReports(late)).every((o) => o.status === 'stored'));

      const mine = [...sent, ...sealedLater, ...late].filter((r) => r.tenantId === t);
      const got = await latest(t);
      assert.deepEqual(got.hosts, expected(mine));
      assert.equal(got.statements, 4, 'hosts, head rows, which blocks, and the data of those not decoded yet');
      assert.deepEqual((await latest(other)).hosts, expected(sent.filter((r) => r.tenantId === other)));
      // One host: its row alone, in as many statements; a host of another tenant or none is no row.
      for (const [id, statements] of [['tail', 4], ['late', 4], ['live', 3]] as const) {
        const c = counting(conn);
        assert.deepEqual(await latestByHost(c.conn, t, { nameOf: (ids) => store.metricNames(t, ids), hostId: id }), expected(mine.filter((r) => r.hostId === id)));
        assert.equal(c.statements(), statements, id);
      }
      assert.deepEqual(await latestByHost(conn, other, { nameOf: (ids) => store.metricNames(other, ids), hostId: 'tail' }), []);
      assert.deepEqual(await store.latestByHost(t, 'nowhere'), []);
      assert.deepEqual(await store.latestByHost(t, 'quiet'), expected(mine.filter((r) => r.hostId === 'quiet')));
    });

    test('a quiet host\'s last block is decoded once; a late report, then its re-seal, are read anew', async () => {
      const t = (await newTenant(store)).tenantId;
      const sent = every(t, 'q', T0, T0 + 30 * MIN, 10_000);
      assert.ok((await store.appendReports(sent)).every((o) => o.status === 'stored'));
      await store.flush();
      const tails = new TailRows();
      const read = async () => (await latest(t, tails)).hosts;
      const cold = await latest(t, tails);
      assert.deepEqual(cold.hosts, expected(sent));
      assert.ok(cold.blobBytes > 0);
      const warm = await latest(t, tails);
      assert.deepEqual(warm.hosts, expected(sent));
      assert.equal(tails.decoded, 1, 'the second read decodes nothing');
      assert.equal(warm.blobBytes, 0, 'nor reads the block\'s data');
      assert.equal(warm.statements, 3);
      // A late report into the sealed window: it waits in the head, newer than the block's rows.
      const late = report(t, 'q', T0 + 45 * MIN);
      assert.equal((await store.appendReport(late)).status, 'stored');
      assert.deepEqual(await read(), expected([...sent, late]));
      await store.flush();
      assert.deepEqual(await read(), expected([...sent, late]), 'merged into a new block');
      assert.equal(tails.decoded, 2, 'the re-sealed block is decoded, once');
    });

    test('the number of statements does not grow with the number of hosts', async () => {
      const small = (await newTenant(store)).tenantId;
      const large = (await newTenant(store)).tenantId;
      const fleet = (tenantId: string, hosts: number) => Array.from({ length: hosts }, (_, i) => i % 2
        ? every(tenantId, `h${i}`, T0, T0 + 20 * MIN, 60_000)
        : every(tenantId, `h${i}`, T0 + 3 * WINDOW_MS, NOW, 60_000)).flat();
      const sent = [...fleet(small, 2), ...fleet(large, 40)];
      assert.ok((await store.appendReports(sent)).every((o) => o.status === 'stored'));
      await store.flush();
      const one = await latest(small);
      const many = await latest(large);
      assert.equal(one.hosts.length, 2);
      assert.deepEqual(many.hosts, expected(sent.filter((r) => r.tenantId === large)));
      assert.equal(many.statements, one.statements);
    });
  });
}
