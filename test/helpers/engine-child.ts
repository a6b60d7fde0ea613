// A metrics store in a process of its own, for kill -9 tests of the storage engine: it appends reports of
// historic (closed) windows and seals and rolls up after every batch, so a SIGKILL lands mid-append,
// mid-seal or mid-rollup. Each acknowledged batch is printed as one line: `ack <first ts> <last ts>`.
import { openMetricsDatabase } from '../../src/metrics/deps.js';
import { createEngineMetricsStore } from '../../src/metrics/storage/engine-metrics-store.js';
import { ReportMetrics } from '../../src/metrics/domain/report-shapes.js';

const [databaseUrl, dbSchema, dataDir, tenantId, startTs, batches] = process.argv.slice(2);
const database = await openMetricsDatabase({ databaseUrl: databaseUrl || undefined, dbSchema: dbSchema!, dataDir: dataDir! });
const store = createEngineMetricsStore(database, { limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, now: Date.now, writer: { sealIntervalMs: 0 } });
let ts = Number(startTs);
for (let b = 0; b < Number(batches); b++) {
  const reports = [];
  for (let i = 0; i < 50; i++, ts += 10_000) {
    for (const hostId of ['k1', 'k2']) {
      reports.push({ tenantId: tenantId!, hostId, hostname: hostId, platform: 'linux', ts, metrics: ReportMetrics.of([['cpu.usage', (ts / 10_000) % 100], ['memory.used', ts % 7_919]]) });
    }
  }
  const outcomes = await store.appendReports(reports);
  if (outcomes.some((o) => o.status !== 'stored')) throw new Error('unexpected outcome');
  process.stdout.write(`ack ${reports[0]!.ts} ${reports[reports.length - 1]!.ts}\n`);
  await store.flush();
}
await store.close();
await database.close();
