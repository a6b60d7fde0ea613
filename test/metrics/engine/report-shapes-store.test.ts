import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

const T0 = Date.UTC(2025, 5, 1);

/** Every metric of the host's one report, by name, as the store reads it back. */
async function readBack(store: MetricsStore, tenantId: string, hostId: string): Promise<Map<string, number | null>> {
  const series = await store.readHostSeries(tenantId, hostId, { from: 0, to: T0 + 3_600_000, points: 10, minmax: false });
  assert.ok(series, `host ${hostId} exists`);
  const names = await store.metricNames(tenantId, series.metrics.keys());
  return new Map([...series.metrics].map(([id, column]) => [names.get(id)!, column[0] ?? null]));
}

for (const backend of BACKENDS) {
  describe(`report shapes on ${backend}: names travel to the writer by number, or as themselves once the table is full`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 20_000, hostsPerTenant: 10_000 }, now: () => T0 + 60_000, writer: { sealIntervalMs: 0 } });
    });
    after(async () => { await store.close(); await database.close(); await storage.cleanup(); });

    test('reports of many name lists, past the table\'s 100,000 names, store every value under its own name', async () => {
      const { tenantId } = await newTenant(store);
      // Each report starts with a name of its own, so each adds a whole new path of 900 names to the table:
      // the 112th and later travel as names.
      const reports: NewReport[] = Array.from({ length: 120 }, (_, r) => ({
        tenantId, hostId: `h${r}`, hostname: `h${r}`, platform: 'linux', ts: T0 + r,
        metrics: ReportMetrics.of([[`first.${r}`, r], ...Array.from({ length: 899 }, (_, i): [string, number] => [`m.${(i + r) % 899}`, r * 1000 + i])]),
      }));
      for (let i = 0; i < reports.length; i += 10) {
        assert.ok((await store.appendReports(reports.slice(i, i + 10))).every((o) => o.status === 'stored'));
      }
      // The same lists again (known shapes, and lists that still travel as names) for new timestamps.
      assert.ok((await store.appendReports(reports.map((r) => ({ ...r, ts: r.ts + 10_000 })))).every((o) => o.status === 'stored'));
      for (const r of [0, 57, 111, 112, 119]) {
        const back = await readBack(store, tenantId, `h${r}`);
        assert.equal(back.size, 900);
        for (const [name, value] of reports[r]!.metrics) assert.equal(back.get(name), value, `h${r} ${name}`);
      }
    });
  });
}
