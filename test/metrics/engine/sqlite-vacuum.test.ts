import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { VACUUM_STEP_PAGES, VACUUM_STEPS_PER_BUSY_PASS } from '../../../src/metrics/storage/engine/engine-writer.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

/**
 * SQLite only (PostgreSQL vacuums the head table: head-vacuum.test.ts): the
 * pages sealed head rows free are handed back to the filesystem a bounded
 * number at a time while reports keep arriving (handing back a large fleet's
 * at once held appends for seconds), and all of them once reports stop.
 */
describe('free pages of the sealed head on sqlite', () => {
  let storage: TestStorage;
  let database: Database<MetricsTables>;
  let store: MetricsStore;
  const T0 = Date.UTC(2026, 10, 20, 0);
  before(async () => {
    storage = await freshStorage('sqlite');
    database = await openTestMetricsDatabase(storage);
    store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 10_000 }, now: () => T0 + 3 * WINDOW_MS, writer: { sealIntervalMs: 50, seal: { graceMs: 0, idleMs: 100 } } });
  });
  after(async () => {
    await store.close();
    await database.close();
    await storage.cleanup();
  });

  const pragma = (name: string) => Number(database.sqlite!.pragma(name, { simple: true }));
  const headRows = () => Number((database.sqlite!.prepare('SELECT COUNT(*) AS n FROM reports WHERE ts < ?').get(T0 + WINDOW_MS) as { n: number }).n);
  const until = async (what: string, ok: () => boolean, during?: () => Promise<void>) => {
    for (const deadline = Date.now() + 20_000; !ok(); await (during ? during() : sleep(20))) {
      if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    }
  };

  test('handed back a bounded number of pages a pass while reports arrive, and all once they stop', async () => {
    const { tenantId } = await newTenant(store);
    const metrics = ReportMetrics.of(Array.from({ length: 28 }, (_, m) => [`m${m}`, m * 1.5] as [string, number]));
    const report = (hostId: string, ts: number): NewReport => ({ tenantId, hostId, hostname: hostId, platform: 'linux', ts, metrics });
    const old = Array.from({ length: 160 }, (_, h) => Array.from({ length: 360 }, (_, i) => report(`old-${h}`, T0 + i * 10_000))).flat();
    for (let i = 0; i < old.length; i += 2_000) assert.ok((await store.appendReports(old.slice(i, i + 2_000))).every((o) => o.status === 'stored'));
    const pages = pragma('page_count');

    // Another host reports into the open window every 10 ms, more often than the passes (every 50 ms) come.
    let live = 0;
    const free: number[] = [];
    const at: number[] = [];
    const arrive = async () => {
      assert.equal((await store.appendReport(report('live', T0 + 2 * WINDOW_MS + live++ * 1_000))).status, 'stored');
      free.push(pragma('freelist_count'));
      at.push(performance.now());
      await sleep(10);
    };
    await until('the old windows to be sealed', () => headRows() === 0, arrive);
    for (let i = 0; i < 50; i++) await arrive();
    // A busy pass hands back VACUUM_STEPS_PER_BUSY_PASS turns of VACUUM_STEP_PAGES at most, and passes come every
    // 50 ms: between two looks, at most one pass more than the time between them holds (a live report reuses a page or two).
    const busyPass = VACUUM_STEPS_PER_BUSY_PASS * VACUUM_STEP_PAGES;
    free.slice(1).forEach((f, i) => {
      const passes = 1 + Math.floor((at[i + 1]! - at[i]!) / 50);
      assert.ok(free[i]! - f <= passes * busyPass + 10, `${free[i]! - free[i + 1]!} pages handed back in ${(at[i + 1]! - at[i]!).toFixed(0)} ms`);
    });
    assert.ok(Math.max(...free) > busyPass + 10, `the sealed rows freed more than a busy pass hands back (${Math.max(...free)} pages)`);
    // Handed back, not only reused: the live reports written after the peak took far fewer pages than the drop.
    const peak = free.indexOf(Math.max(...free));
    const reportsSince = free.length - 1 - peak;
    assert.ok(free[peak]! - free.at(-1)! > reportsSince + 100, `some were handed back while reports arrived (${free[peak]} -> ${free.at(-1)} free pages over ${reportsSince} reports)`);

    await until('the free pages to be handed back', () => pragma('freelist_count') === 0);
    assert.ok(pragma('page_count') < pages - busyPass, `the file shrank: ${pages} -> ${pragma('page_count')} pages`);
  });
});
