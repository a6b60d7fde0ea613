import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { SEAL_GROUP_ROWS } from '../../../src/metrics/storage/engine/engine-writer.js';
import { METRICS_SQLITE_CACHE_KIB } from '../../../src/metrics/storage/engine/sql-conn.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

/**
 * SQLite's WAL under a steady stream of appends: the seal loop's checkpoints
 * (and SQLite's own, at 4 MiB) keep it bounded however many reports go
 * through it, and once nothing waits it is cut back to nothing.
 */
let storage: TestStorage;
let database: Database<MetricsTables>;
let store: MetricsStore;
const NOW = Date.UTC(2026, 10, 25, 12);
before(async () => {
  storage = await freshStorage('sqlite');
  database = await openTestMetricsDatabase(storage);
  store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 10_000 }, now: () => NOW, writer: { sealIntervalMs: 20 }, foldThreads: 0 });
});
after(async () => {
  await store.close();
  await database.close();
  await storage.cleanup();
});

const walBytes = () => { try { return statSync(`${database.sqlite!.name}-wal`).size; } catch { return 0; } };

test('the WAL stays bounded under appends that never pause, and is emptied once they stop', async () => {
  const { tenantId } = await newTenant(store);
  const metrics = ReportMetrics.of(Array.from({ length: 28 }, (_, i) => [`m.${i}`, i * 1.5] as [string, number]));
  let largest = 0;
  // 40 hosts x 600 reports, 40 at a time in flight: about 7 MB of head rows, several times the WAL's bound.
  for (let step = 0; step < 600; step++) {
    const ts = NOW - 2 * 3_600_000 + step * 10_000;
    const batch: NewReport[] = Array.from({ length: 40 }, (_, h) => ({ tenantId, hostId: `h${h}`, hostname: `h${h}`, platform: 'linux', ts, metrics }));
    const outcomes = await Promise.all(batch.map((r) => store.appendReport(r)));
    assert.ok(outcomes.every((o) => o.status === 'stored'));
    largest = Math.max(largest, walBytes());
  }
  assert.ok(largest > 0, 'appends went through the WAL');
  // The backstop's 4,096 pages and what one commit adds past it: at most a seal group's, one page per head row it
  // deletes (each row on a page of its own at worst) plus its blocks' and indexes' pages. Each page is a frame of
  // 1 KiB and a 24-byte header. Without checkpoints it grows to about 50 MB here.
  const bound = (4096 + SEAL_GROUP_ROWS + 200) * (1024 + 24);
  assert.ok(largest < bound, `the WAL reached ${largest} bytes, past ${bound}`);
  await store.flush();
  assert.equal(walBytes(), 0);
});

test('the service\'s connection keeps a page cache of METRICS_SQLITE_CACHE_KIB, not better-sqlite3\'s 16 MB default', () => {
  assert.equal(database.sqlite!.pragma('cache_size', { simple: true }), -METRICS_SQLITE_CACHE_KIB);
});
