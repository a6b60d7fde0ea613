import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { appendBatch, newWriterState, type HeadReport } from '../../../src/metrics/storage/engine/head-writer.js';
import { SealedTimestamps } from '../../../src/metrics/storage/engine/sealed-timestamps.js';
import { sealWindow } from '../../../src/metrics/storage/engine/sealer.js';
import { pgConn, type SqlConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import { WINDOW_MS, windowOf } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';

/**
 * PostgreSQL only (on SQLite appends and seals share one writer and never
 * overlap): a report re-sent into a closed window while another connection
 * (another instance) seals that window is a duplicate, stored once. The seal
 * is held open right after it deleted the head rows, until the re-send is
 * seen waiting on it, so the race is reproduced every run, not by chance.
 */
const LIMITS = { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function report(tenantId: string, hostId: string, ts: number): NewReport {
  return { tenantId, hostId, hostname: hostId, platform: 'linux', ts, metrics: ReportMetrics.of([['cpu.usage', ts % 1000]]) };
}

for (const backend of BACKENDS.filter((b) => b === 'postgres')) {
  describe(`a re-sent report racing a seal of its window on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    let conn: SqlConn;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      // The store seals nothing by itself: the seals here are the other instance's.
      store = createEngineMetricsStore(database, { limits: LIMITS, now: Date.now, writer: { sealIntervalMs: 0 } });
      conn = pgConn(database.pgPool!);
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    const hostKey = async (tenantId: string, hostId: string) =>
      Number((await conn.all<{ key: number }>('SELECT key FROM hosts WHERE tenant_id = ? AND host_id = ?', [tenantId, hostId]))[0]!.key);
    const headRows = async (key: number) => Number((await conn.all<{ n: string }>('SELECT count(*) AS n FROM reports WHERE host_key = ?', [key]))[0]!.n);

    /**
     * `conn` whose seal transactions, once they deleted the head rows, run `during` and then wait, before committing,
     * until another backend is seen waiting on them or `during`'s work settled; `waited` tells which.
     */
    function holdAfterDelete(during: () => Promise<unknown>): { conn: SqlConn; waited: () => boolean } {
      let waited = false;
      const held: SqlConn = {
        ...conn,
        transaction: (fn, opts) => conn.transaction((tx) => fn({
          ...tx,
          run: async (text, params) => {
            const n = await tx.run(text, params);
            if (!text.startsWith('DELETE FROM reports')) return n;
            const [{ pid }] = await tx.all<{ pid: number }>('SELECT pg_backend_pid() AS pid') as [{ pid: number }];
            let settled = false;
            void during().finally(() => { settled = true; });
            for (const until = Date.now() + 10_000; !settled && Date.now() < until; await pause(5)) {
              const blocked = await conn.all('SELECT 1 FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))', [pid]);
              if (blocked.length) { waited = true; break; }
            }
            return n;
          },
        }), opts),
      };
      return { conn: held, waited: () => waited };
    }

    test('re-sent while another instance seals the window (after its delete, before its commit): a duplicate, stored once', async () => {
      const { tenantId } = await newTenant(store);
      const w = windowOf(Date.now()) - 3 * WINDOW_MS;
      const times = Array.from({ length: 5 }, (_, i) => w + 1_000 + i * 10_000);
      assert.ok((await store.appendReports(times.map((ts) => report(tenantId, 'r', ts)))).every((o) => o.status === 'stored'));
      const key = await hostKey(tenantId, 'r');

      let resent: Promise<unknown> | undefined;
      const seal = holdAfterDelete(() => (resent = store.appendReport(report(tenantId, 'r', times[2]!))));
      assert.equal(await sealWindow(seal.conn, { hostKey: key, windowStart: w }, Date.now()), true);
      assert.ok(seal.waited(), 'the re-send reached the seal while it was open and waited on it');
      assert.deepEqual(await resent, { status: 'duplicate' });

      assert.equal(await headRows(key), 0, 'no head row was written for the re-sent report');
      const [block] = await conn.all<{ rows: number }>('SELECT rows FROM blocks WHERE host_key = ? AND window_start = ?', [key, w]);
      assert.equal(block?.rows, 5);
      const series = await store.readHostSeries(tenantId, 'r', { from: w, to: w + WINDOW_MS - 1, points: 10_000, minmax: false });
      assert.deepEqual(series?.timestamps, times, 'each timestamp read once');
    });

    test('an append holding the host (a report of a closed window) makes a seal skip it, not wait; the next seal takes the window', async () => {
      const { tenantId } = await newTenant(store);
      const w = windowOf(Date.now()) - 3 * WINDOW_MS;
      const deps = { conn, state: newWriterState(), limits: LIMITS, sealed: new SealedTimestamps(), wallNow: Date.now, now: Date.now };
      const head = (ts: number): HeadReport => ({ tenantId, hostId: 's', hostname: 's', platform: 'linux', ts, names: ['cpu.usage'], values: [1] });
      assert.ok((await appendBatch(deps, [head(w + 1_000), head(w + 11_000)])).every((o) => o.status === 'stored'));
      const key = await hostKey(tenantId, 's');

      // The append pauses after its host lock, while a seal runs on another connection.
      let sealedMeanwhile: boolean | undefined;
      const pausing: SqlConn = {
        ...conn,
        transaction: (fn, opts) => conn.transaction((tx) => fn({
          ...tx,
          all: async <T>(text: string, params?: readonly unknown[]) => {
            const rows = await tx.all<T>(text, params);
            if (text.includes('FOR SHARE')) sealedMeanwhile = await sealWindow(conn, { hostKey: key, windowStart: w }, Date.now());
            return rows;
          },
        }), opts),
      };
      assert.deepEqual(await appendBatch({ ...deps, conn: pausing }, [head(w + 11_000), head(w + 21_000)]), [{ status: 'duplicate' }, { status: 'stored' }]);
      assert.equal(sealedMeanwhile, false, 'the seal skipped the host the append held');
      assert.equal(await headRows(key), 3);
      assert.equal(await sealWindow(conn, { hostKey: key, windowStart: w }, Date.now()), true);
      assert.equal(await headRows(key), 0);
    });

    test('reports of the open window take no host lock (no statement added); a batch with closed windows takes one for all its hosts', async () => {
      const { tenantId } = await newTenant(store);
      const statements: string[] = [];
      const recording: SqlConn = {
        ...conn,
        transaction: (fn, opts) => conn.transaction((tx) => fn({
          ...tx,
          all: <T>(text: string, params?: readonly unknown[]) => { statements.push(text); return tx.all<T>(text, params); },
          run: (text, params) => { statements.push(text); return tx.run(text, params); },
        }), opts),
      };
      const now = Date.now();
      const deps = { conn: recording, state: newWriterState(), limits: LIMITS, sealed: new SealedTimestamps(), wallNow: () => now, now: () => now };
      const head = (hostId: string, ts: number): HeadReport => ({ tenantId, hostId, hostname: hostId, platform: 'linux', ts, names: ['cpu.usage'], values: [1] });
      const open = windowOf(now);
      // The first batch creates the hosts and names; the next ones are what a fleet sends all day.
      await appendBatch(deps, ['a', 'b', 'c'].map((h) => head(h, open)));
      statements.length = 0;
      assert.ok((await appendBatch(deps, ['a', 'b', 'c'].map((h) => head(h, open + 10_000)))).every((o) => o.status === 'stored'));
      assert.deepEqual(statements.filter((s) => s.includes('FOR SHARE')), []);
      const openStatements = statements.length;

      statements.length = 0;
      const closed = open - 2 * WINDOW_MS;
      const outcomes = await appendBatch(deps, [head('a', open + 20_000), head('b', closed), head('c', closed), head('c', closed + 10_000)]);
      assert.ok(outcomes.every((o) => o.status === 'stored'));
      assert.equal(statements.filter((s) => s.includes('FOR SHARE')).length, 1);
      assert.equal(statements.length, openStatements + 1, 'one statement more than a batch of the open window');
    });
  });
}
