import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { nodeEntry } from '../../helpers/node-entry.js';

/**
 * SIGKILL while the engine appends, seals and rolls up (a child process does
 * all three in a loop): after every kill, every acknowledged report is
 * readable exactly once, and the tenant aggregate (from rollups and blocks)
 * counts each stored sample once. KILL_CYCLES raises the number of kills.
 */
const CYCLES = Number(process.env.KILL_CYCLES ?? 6);
const START = Date.UTC(2025, 0, 1);

function runChild(storage: TestStorage, tenantId: string, startTs: number, killAfterMs: number): Promise<Array<[number, number]>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeEntry('test/helpers/engine-child.ts'), storage.databaseUrl ?? '', storage.pgSchema, storage.dataDir, tenantId, String(startTs), '1000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acks: Array<[number, number]> = [];
    let buf = '';
    let err = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const [, a, b] = buf.slice(0, nl).split(' ');
        acks.push([Number(a), Number(b)]);
        buf = buf.slice(nl + 1);
        // The clock starts at the first ack: the process is up and writing.
        timer ??= setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }
    });
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve(acks);
      else reject(new Error(`child exited ${code} before the kill: ${err.slice(0, 2000)}`));
    });
  });
}

for (const backend of BACKENDS) {
  describe(`kill -9 during append, seal and rollup on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    before(async () => { storage = await freshStorage(backend); });
    after(async () => {
      await store?.close();
      await database?.close();
      await storage.cleanup();
    });

    test(`after ${CYCLES} kills nothing acknowledged is lost and nothing is counted twice`, async () => {
      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, now: Date.now, writer: { sealIntervalMs: 0 } });
      const { tenantId } = await newTenant(store);
      await store.close();
      await database.close();

      const acked = new Set<number>();
      let next = START;
      for (let c = 0; c < CYCLES; c++) {
        for (const [a, b] of await runChild(storage, tenantId, next, 100 + ((c * 137) % 900))) {
          for (let ts = a; ts <= b; ts += 10_000) acked.add(ts);
        }
        // The next run starts past anything the killed one may have sent, in a later window.
        next = Math.max(next, ...acked) + 2 * WINDOW_MS;
      }
      assert.ok(acked.size > 0, 'the child acknowledged writes before being killed');

      database = await openTestMetricsDatabase(storage);
      store = createEngineMetricsStore(database, { limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, now: Date.now, writer: { sealIntervalMs: 0 } });
      if (database.sqlite) assert.deepEqual(database.sqlite.pragma('integrity_check'), [{ integrity_check: 'ok' }]);
      // Half of the reads before the remaining head is sealed, half after.
      for (const phase of ['as left', 'after sealing'] as const) {
        if (phase === 'after sealing') await store.flush();
        let samples = 0;
        for (const hostId of ['k1', 'k2']) {
          const got = (await store.readHostSeries(tenantId, hostId, { from: START, to: next, points: 10_000_000, minmax: false }))!;
          const ts = got.timestamps;
          for (let i = 1; i < ts.length; i++) assert.ok(ts[i]! > ts[i - 1]!, `${phase}: ${hostId} has ${ts[i]} once`);
          const have = new Set(ts);
          for (const t of acked) assert.ok(have.has(t), `${phase}: acknowledged ${hostId}@${t} is readable`);
          samples += ts.length;
        }
        // One bucket over everything: the aggregate's sample count shows up as its mean of the constant-per-ts metric.
        const agg = await store.readAggregate(tenantId, { from: START, to: next, points: 1, minmax: false });
        assert.equal(agg.timestamps.length, 1);
        let sum = 0;
        for (const hostId of ['k1', 'k2']) {
          const got = (await store.readHostSeries(tenantId, hostId, { from: START, to: next, points: 10_000_000, minmax: false }))!;
          const names = await store.metricNames(tenantId, got.metrics.keys());
          const id = [...names].find(([, n]) => n === 'memory.used')![0];
          sum += got.metrics.get(id)!.reduce<number>((x, y) => x + (y ?? 0), 0);
        }
        const aggNames = await store.metricNames(tenantId, agg.metrics.keys());
        const aggId = [...aggNames].find(([, n]) => n === 'memory.used')![0];
        assert.ok(Math.abs(agg.metrics.get(aggId)![0]! - sum / samples) < 1e-6, `${phase}: the aggregate counts every stored sample once`);
      }
    });
  });
}
