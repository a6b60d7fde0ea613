import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { HeadWindows } from '../../../src/metrics/storage/engine/head-windows.js';
import { findSealable } from '../../../src/metrics/storage/engine/sealer.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

const W = WINDOW_MS;
const settings = { graceMs: 0, idleMs: 500 };
const noPace = { lastAppend: new Map<number, number>(), appendGap: new Map<number, number>() };

/** [host, window start, generation] of every known window, sorted. */
const known = (h: HeadWindows) => [...h.hosts()].flatMap(([host, windows]) => [...windows].map(([w, g]) => [host, w, g])).sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);

describe('HeadWindows', () => {
  test('knows each host window once, with the generation of its last append', () => {
    const h = new HeadWindows();
    h.add(1, 0);
    h.add(1, W);
    h.add(1, 0);
    h.add(2, 5 * W);
    assert.deepEqual(known(h), [[1, 0, 3], [1, W, 2], [2, 5 * W, 4]]);
  });

  test('a window is forgotten only if nothing was appended to it after its generation was read', () => {
    const h = new HeadWindows();
    h.add(1, 0);
    const seen = known(h)[0]![2]!;
    h.add(1, 0); // an append that came while the seal ran: its row may not be in the block
    h.forget(1, 0, seen);
    assert.equal(known(h).length, 1, 'kept: the later append must be sealed too');
    h.forget(1, 0, known(h)[0]![2]!);
    assert.deepEqual(known(h), []);
    assert.deepEqual([...h.hosts()], [], 'a host with no window left is dropped');
  });
});

describe('findSealable', () => {
  test('a closed window is due once its host moved on or went quiet; an open one never; force ignores quiet', () => {
    const h = new HeadWindows();
    h.add(1, 0); h.add(1, W); // host 1 moved on to W: window 0 is due
    h.add(2, 0); // host 2 still fills window 0, appended 100 ms ago
    h.add(3, 0); // host 3: quiet for a second
    h.add(4, 2 * W); // open: the clock is inside it
    const pace = { lastAppend: new Map([[1, 1_900], [2, 1_900], [3, 1_000]]), appendGap: new Map<number, number>() };
    const now = 2 * W + 1;
    const due = (force: boolean) => findSealable(h, settings, now, 2_000, pace, force).map((c) => [c.hostKey, c.windowStart]);
    assert.deepEqual(due(false), [[1, 0], [3, 0]]);
    assert.deepEqual(due(true), [[1, 0], [1, W], [2, 0], [3, 0]]);
  });

  test('a window appended by no one this writer knows of (another instance, an earlier process) is due at once', () => {
    const h = new HeadWindows();
    h.add(9, 0);
    assert.deepEqual(findSealable(h, settings, 2 * W, 0, noPace, false).map((c) => c.hostKey), [9]);
  });
});

const report = (tenantId: string, hostId: string, ts: number): NewReport => ({ tenantId, hostId, hostname: hostId, platform: 'linux', ts, metrics: ReportMetrics.of([['cpu.usage', ts % 97]]) });

for (const backend of BACKENDS) {
  describe(`the head's windows across processes on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    const T0 = Date.UTC(2026, 10, 20, 0);
    const now = () => T0 + 3 * W;
    const stores: MetricsStore[] = [];
    let tenantId: string;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      ({ tenantId } = await newTenant(open({ sealIntervalMs: 0 })));
    });
    after(async () => {
      for (const s of stores) await s.close();
      await database.close();
      await storage.cleanup();
    });
    const open = (writer: { sealIntervalMs: number; headScanIntervalMs?: number }) => {
      const s = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 10_000 }, now, writer });
      stores.push(s);
      return s;
    };
    const headRows = async (hostId: string) => {
      const sql = 'SELECT COUNT(*) AS n FROM reports r JOIN hosts h ON h.key = r.host_key WHERE h.host_id = ?';
      if (database.sqlite) return (database.sqlite.prepare(sql).get(hostId) as { n: number }).n;
      return Number((await database.pgPool!.query<{ n: string }>(sql.replace('?', '$1'), [hostId])).rows[0]!.n);
    };
    const sealedWithin = async (hostId: string, ms: number) => {
      for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if ((await headRows(hostId)) === 0) return true;
      return false;
    };

    test('windows an earlier process left in the head are sealed by the next one\'s own passes, no flush', async () => {
      const earlier = open({ sealIntervalMs: 0 });
      assert.ok((await earlier.appendReports(Array.from({ length: 10 }, (_, i) => report(tenantId, 'left', T0 + i * 10_000)))).every((o) => o.status === 'stored'));
      await earlier.close();
      assert.equal(await headRows('left'), 10);
      open({ sealIntervalMs: 50 });
      assert.ok(await sealedWithin('left', 10_000), 'the restarted writer found the window with its first scan and sealed it');
    });

    if (backend === 'postgres') {
      test('a window only another instance appended to is sealed after this one\'s next scan of the head', async () => {
        open({ sealIntervalMs: 50, headScanIntervalMs: 300 });
        await sleep(200); // its first pass has scanned an empty head
        const other = open({ sealIntervalMs: 0 }); // appends, never seals
        assert.ok((await other.appendReports(Array.from({ length: 10 }, (_, i) => report(tenantId, 'elsewhere', T0 + i * 10_000)))).every((o) => o.status === 'stored'));
        assert.ok(await sealedWithin('elsewhere', 10_000), 'sealed by the instance that never saw the appends');
      });
    }
  });
}
