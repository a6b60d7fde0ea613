import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type BackendName, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

/**
 * Seals yield to a backlog, through the real writer thread: a closed window
 * waits while bulk appends (appendReports) keep coming at the busy rate (here
 * any at all: 1 report/s), is sealed once they stop, and is sealed anyway
 * once it has waited maxMs. Reports appended one by one (appendReport) at the
 * same pace never hold seals back. Passes every 250 ms; eight appends always
 * in flight.
 */
const NOW = Date.UTC(2026, 10, 26, 12);
const PASS_MS = 250;
const metrics = ReportMetrics.of([['cpu.usage', 12.5], ['memory.used', 1024]]);

interface Fixture {
  store: MetricsStore;
  /** Blocks of the tenant's host `old`, or the rows its reports still have in the head. */
  count(table: 'blocks' | 'reports', tenantId: string): Promise<number>;
  /** Appends to host `busy` with eight in flight until `until` says stop (a millisecond apart: never past NOW). */
  burst(tenantId: string, until: () => Promise<boolean>, backlog?: boolean): Promise<void>;
}

/** A suite with a store on `backend` whose seals wait at most `maxMs` for a backlog; its tests get it once `before` has run. */
function withStore(backend: BackendName, maxMs: number, tests: (f: Fixture) => void): void {
  describe(`seals and a backlog on ${backend}, waiting at most ${maxMs} ms`, () => fixture(backend, maxMs, tests));
}

function fixture(backend: BackendName, maxMs: number, tests: (f: Fixture) => void): void {
  let storage: TestStorage;
  let database: Database<MetricsTables>;
  const f = {} as Fixture;
  before(async () => {
    storage = await freshStorage(backend);
    database = await openTestMetricsDatabase(storage);
    f.store = createEngineMetricsStore(database, {
      limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, now: () => NOW, foldThreads: 0,
      writer: { sealIntervalMs: PASS_MS, seal: { graceMs: 0, idleMs: 0 }, deferral: { busyReportsPerS: 1, maxMs } },
    });
  });
  after(async () => {
    await f.store.close();
    await database.close();
    await storage.cleanup();
  });
  f.count = async (table, tenantId) => {
    const text = `SELECT COUNT(*) AS n FROM ${table} x JOIN hosts h ON h.key = x.host_key WHERE h.tenant_id = ? AND h.host_id = 'old'`;
    return database.sqlite
      ? Number((database.sqlite.prepare(text).get(tenantId) as { n: number }).n)
      : Number((await database.pgPool!.query<{ n: string }>(text.replace('?', '$1'), [tenantId])).rows[0]!.n);
  };
  f.burst = async (tenantId, until, backlog = true) => {
    let ts = NOW - 30 * 60_000;
    let stop = false;
    const lane = async () => {
      while (!stop) {
        const r: NewReport = { tenantId, hostId: 'busy', hostname: 'busy', platform: 'linux', ts: ts += 1, metrics };
        assert.equal((backlog ? (await f.store.appendReports([r]))[0]! : await f.store.appendReport(r)).status, 'stored');
      }
    };
    const lanes = Array.from({ length: 8 }, lane);
    try {
      while (!(await until())) await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      stop = true;
      await Promise.all(lanes);
    }
  };
  tests(f);
}

/** Ten reports of host `old` in a window closed long ago, stored as a bulk body or one by one; when they were stored. */
async function storeOld(store: MetricsStore, tenantId: string, backlog: boolean): Promise<number> {
  const old = Array.from({ length: 10 }, (_, i): NewReport => ({ tenantId, hostId: 'old', hostname: 'old', platform: 'linux', ts: NOW - 5 * WINDOW_MS + i * 10_000, metrics }));
  if (backlog) assert.ok((await store.appendReports(old)).every((o) => o.status === 'stored'));
  else for (const r of old) assert.equal((await store.appendReport(r)).status, 'stored');
  return Date.now();
}

/** Bursts until `old`'s window is sealed (or 20 s); when it was, or 0. */
async function burstUntilSealed(f: Fixture, tenantId: string, stored: number, backlog: boolean): Promise<number> {
  let sealedAt = 0;
  await f.burst(tenantId, async () => {
    if (await f.count('blocks', tenantId) > 0) sealedAt = Date.now();
    return sealedAt > 0 || Date.now() - stored > 20_000;
  }, backlog);
  return sealedAt;
}

for (const backend of BACKENDS) {
  withStore(backend, 60_000, (f) => {
    test('a closed window waits while bulk appends keep coming, and is sealed once they stop', async () => {
      const { tenantId } = await newTenant(f.store);
      const stored = await storeOld(f.store, tenantId, true);
      // Four passes and more: none seals it.
      let sealed = 0;
      await f.burst(tenantId, async () => { sealed = Math.max(sealed, await f.count('blocks', tenantId)); return Date.now() - stored >= 4 * PASS_MS + 200; });
      assert.equal(sealed, 0, 'not sealed during the burst');
      // The burst over, the next pass seals it (long before maxMs).
      const deadline = Date.now() + 10_000;
      while (await f.count('blocks', tenantId) === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(await f.count('blocks', tenantId), 1, 'sealed once the appends stopped');
      assert.equal(await f.count('reports', tenantId), 0, 'the sealed window left the head');
    });

    test('reports sent one by one at the same pace do not hold a closed window back', async () => {
      const { tenantId } = await newTenant(f.store);
      const stored = await storeOld(f.store, tenantId, false);
      const sealedAt = await burstUntilSealed(f, tenantId, stored, false);
      assert.ok(sealedAt > 0, 'sealed while the appends went on');
      assert.ok(sealedAt - stored < 60_000, `sealed ${sealedAt - stored} ms after it was stored`);
    });
  });

  withStore(backend, 1_500, (f) => {
    test('under a backlog that never stops, a closed window is sealed anyway, no sooner than maxMs', async () => {
      const { tenantId } = await newTenant(f.store);
      const stored = await storeOld(f.store, tenantId, true);
      const sealedAt = await burstUntilSealed(f, tenantId, stored, true);
      assert.ok(sealedAt > 0, 'sealed while the appends went on');
      assert.ok(sealedAt - stored >= 1_500, `sealed ${sealedAt - stored} ms after it was stored`);
      assert.equal(await f.count('reports', tenantId), 0, 'the sealed window left the head');
    });
  });
}
