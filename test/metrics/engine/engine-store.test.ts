import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import type { MetricsStore, NewReport, StoredSeries } from '../../../src/metrics/domain/metrics-store.js';
import { createEngineMetricsStore } from '../../../src/metrics/storage/engine-metrics-store.js';
import { planGrid } from '../../../src/metrics/storage/engine/query-plan.js';
import { HeadWindows, scanHead } from '../../../src/metrics/storage/engine/head-windows.js';
import { findSealable, sealWindow } from '../../../src/metrics/storage/engine/sealer.js';
import { databaseConn, type SqlConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import { AGGREGATE_UNIT_MS, HOST_TIER_MS, TENANT_COARSE_MS, TENANT_FINE_MS, WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { newTenant, openTestMetricsDatabase } from '../../helpers/metrics.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

/**
 * The storage engine against a brute-force model: reports of several hosts
 * (at different rates, with jitter, gaps and a metric that comes and goes)
 * are stored, partly sealed, partly rolled up, then late reports and
 * duplicates arrive for sealed windows; every read (raw, bucketed from raw
 * blocks, from host and tenant tiers, mixed with the head) must equal what
 * the raw reports say, for random ranges and budgets.
 */
const T0 = Date.UTC(2026, 10, 20, 0);
const HOURS = 7;
const NOW = T0 + (HOURS + 2) * WINDOW_MS;

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Truth = Map<string, Map<number, ReadonlyMap<string, number>>>;

function makeReports(tenantId: string, hostId: string, intervalMs: number, rnd: () => number): NewReport[] {
  const out: NewReport[] = [];
  let cpu = 50;
  let bytes = Math.floor(rnd() * 1e12);
  for (let t = T0 + Math.floor(rnd() * intervalMs); t < T0 + HOURS * WINDOW_MS; t += intervalMs + Math.floor(rnd() * 300) - 150) {
    if (rnd() < 0.03) continue; // a missed report
    cpu = Math.min(100, Math.max(0, Math.round((cpu + (rnd() - 0.5) * 10) * 10) / 10));
    bytes += Math.floor(rnd() * 1e6);
    const metrics = new Map<string, number>([['cpu.usage', cpu], ['memory.total', 8589934592], ['network.rxBytes', bytes]]);
    // A disk that is mounted only for part of the time.
    if (Math.floor((t - T0) / 5_400_000) % 2 === 0) metrics.set('disk./data.percent', Math.round(rnd() * 1000) / 10);
    // A sensor that misses readings at random: gaps anywhere inside a block.
    if (rnd() < 0.7) metrics.set('sensors.gpu.temp', Math.round(rnd() * 900) / 10);
    out.push({ tenantId, hostId, hostname: hostId, platform: 'linux', ts: t, metrics: ReportMetrics.of(metrics) });
  }
  return out;
}

function remember(truth: Truth, r: NewReport): void {
  let host = truth.get(`${r.tenantId}/${r.hostId}`);
  if (!host) truth.set(`${r.tenantId}/${r.hostId}`, (host = new Map()));
  if (!host.has(r.ts)) host.set(r.ts, r.metrics);
}

/** What an answer must hold: per bucket of the grid, sum/count/min/max of every sample in it. */
function bruteBuckets(samples: Array<{ ts: number; metrics: ReadonlyMap<string, number> }>, start: number, width: number, count: number) {
  const acc = new Map<string, Array<{ sum: number; n: number; min: number; max: number }>>();
  for (const s of samples) {
    if (s.ts < start || s.ts >= start + width * count) continue;
    const b = Math.floor((s.ts - start) / width);
    for (const [name, v] of s.metrics) {
      let cells = acc.get(name);
      if (!cells) acc.set(name, (cells = Array.from({ length: count }, () => ({ sum: 0, n: 0, min: Infinity, max: -Infinity }))));
      const c = cells[b]!;
      c.sum += v; c.n += 1; c.min = Math.min(c.min, v); c.max = Math.max(c.max, v);
    }
  }
  return acc;
}

/**
 * `samples` must be those of [from, to] (the answer holds no other); buckets are the grid's, aligned to multiples of
 * their width, and a first bucket starting before `from` is stamped `from`.
 */
function assertMatchesBrute(got: StoredSeries, names: Map<number, string>, samples: Array<{ ts: number; metrics: ReadonlyMap<string, number> }>, from: number, label: string): void {
  const width = got.bucketMs!;
  const start = Math.floor(from / width) * width;
  const count = samples.length ? Math.floor((Math.max(...samples.map((s) => s.ts)) - start) / width) + 1 : 0;
  const brute = bruteBuckets(samples, start, width, count);
  const bucketOf = (t: number) => Math.floor((t - start) / width);
  const expectedTimestamps = [...new Set(samples.map((s) => Math.max(from, start + bucketOf(s.ts) * width)))].sort((a, b) => a - b);
  assert.deepEqual(got.timestamps, expectedTimestamps, `${label}: bucket starts`);
  for (const [id, col] of got.metrics) {
    const name = names.get(id)!;
    const cells = brute.get(name)!;
    got.timestamps.forEach((t, i) => {
      const c = cells[bucketOf(t)]!;
      if (!c.n) { assert.equal(col[i], null, `${label} ${name} @${t}`); return; }
      assert.ok(Math.abs(col[i]! - c.sum / c.n) <= 1e-9 * Math.max(1, Math.abs(c.sum / c.n)), `${label} ${name} @${t}: ${col[i]} vs ${c.sum / c.n}`);
      assert.equal(got.min!.get(id)![i], c.min, `${label} ${name} min @${t}`);
      assert.equal(got.max!.get(id)![i], c.max, `${label} ${name} max @${t}`);
    });
  }
  assert.deepEqual([...got.metrics.keys()].map((id) => names.get(id)).sort(), [...brute.keys()].sort(), `${label}: metrics`);
}

for (const backend of BACKENDS) {
  describe(`storage engine against a brute-force model on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: MetricsStore;
    let conn: SqlConn;
    const truth: Truth = new Map();
    let tenantA: string;
    let tenantB: string;
    const rnd = prng(7);

    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      // No background loop: the test decides what is sealed and rolled up when.
      // One fold thread whatever the machine: long ranges fold part of their blocks apart (fold-pool.ts).
      store = createEngineMetricsStore(database, { limits: { perHost: 1000, perTenant: 1000, hostsPerTenant: 10_000 }, now: () => NOW, writer: { sealIntervalMs: 0 }, foldThreads: 1 });
      conn = databaseConn(database);
      tenantA = (await newTenant(store)).tenantId;
      tenantB = (await newTenant(store)).tenantId;
      const streams = [
        makeReports(tenantA, 'h1', 10_000, rnd), makeReports(tenantA, 'h2', 10_000, rnd),
        makeReports(tenantA, 'slow', 30_000, rnd), makeReports(tenantB, 'h1', 10_000, rnd),
      ];
      // Late reports held back: every 7th report of h2 in the first three hours, sent after its windows are sealed.
      const late = streams[1]!.filter((r, i) => i % 7 === 0 && r.ts < T0 + 3 * WINDOW_MS);
      const all = streams.flat().filter((r) => !late.includes(r)).sort((a, b) => a.ts - b.ts);
      for (let i = 0; i < all.length; i += 500) {
        const chunk = all.slice(i, i + 500);
        const outcomes = await store.appendReports(chunk);
        assert.ok(outcomes.every((o) => o.status === 'stored'));
        chunk.forEach((r) => remember(truth, r));
        // Seal and roll up the first hours now and then, as the background loop would.
        if (chunk[chunk.length - 1]!.ts < T0 + 4 * WINDOW_MS && (i / 500) % 3 === 2) await store.flush();
      }
      await store.flush();
      // Late reports into sealed windows, and exact duplicates of sealed reports: duplicates change nothing.
      const dupes = streams[0]!.slice(10, 20).map((r) => ({ ...r, metrics: ReportMetrics.of([['cpu.usage', -1]]) }));
      const outcomes = await store.appendReports([...late, ...dupes]);
      assert.deepEqual(outcomes.map((o) => o.status), [...late.map(() => 'stored'), ...dupes.map(() => 'duplicate')]);
      late.forEach((r) => remember(truth, r));
      // Seal half of the late windows without a tenant rollup (left stale), leave the rest in the head.
      const head = new HeadWindows();
      await scanHead(conn, head);
      const due = findSealable(head, { graceMs: 0, idleMs: 0 }, NOW, Date.now(), { lastAppend: new Map(), appendGap: new Map() }, true);
      for (const c of due.slice(0, Math.ceil(due.length / 2))) await sealWindow(conn, c, Date.now());
      assert.ok(due.length >= 2, 'late reports wait in the head for sealed windows');
    });
    after(async () => {
      await store.close();
      await database.close();
      await storage.cleanup();
    });

    const samplesOf = (tenantId: string, hostId?: string) => [...truth].filter(([k]) => (hostId ? k === `${tenantId}/${hostId}` : k.startsWith(`${tenantId}/`)))
      .flatMap(([, rows]) => [...rows].map(([ts, metrics]) => ({ ts, metrics })));

    test('every stored report reads back raw, exactly, whether in the head, a block or both', async () => {
      for (const hostId of ['h1', 'h2', 'slow']) {
        const got = (await store.readHostSeries(tenantA, hostId, { from: T0, to: NOW, points: 100_000, minmax: false }))!;
        const expected = samplesOf(tenantA, hostId).sort((a, b) => a.ts - b.ts);
        assert.equal(got.bucketMs, null);
        assert.deepEqual(got.timestamps, expected.map((s) => s.ts));
        const names = await store.metricNames(tenantA, got.metrics.keys());
        for (const [id, col] of got.metrics) {
          assert.deepEqual(col, expected.map((s) => s.metrics.get(names.get(id)!) ?? null), `${hostId} ${names.get(id)}`);
        }
      }
    });

    test('bucketed host series equal the brute-force means, min and max, for random ranges and budgets', async () => {
      const r = prng(11);
      let tiered = 0;
      for (let k = 0; k < 40; k++) {
        const hostId = ['h1', 'h2', 'slow'][k % 3]!;
        const from = T0 - WINDOW_MS + Math.floor(r() * (HOURS + 1) * WINDOW_MS);
        const to = from + Math.floor(r() * (HOURS + 1) * WINDOW_MS);
        const points = 1 + Math.floor(r() * 300);
        const got = (await store.readHostSeries(tenantA, hostId, { from, to, points, minmax: true }))!;
        const samples = samplesOf(tenantA, hostId);
        const inRange = samples.filter((s) => s.ts >= from && s.ts <= to).length;
        if (inRange <= points) { assert.equal(got.bucketMs, null, 'raw within the budget'); continue; }
        const grid = planGrid(from, to, points, { unit: 1, tiers: [HOST_TIER_MS] });
        assert.equal(got.bucketMs, grid.width);
        if (grid.tier) tiered++;
        assertMatchesBrute(got, await store.metricNames(tenantA, got.metrics.keys()), samples.filter((s) => s.ts >= from && s.ts <= to), from, `host ${hostId} [${from}, ${to}] ${points}`);
      }
      const long = (await store.readHostSeries(tenantA, 'h1', { from: T0, to: T0 + HOURS * WINDOW_MS - 1, points: 3, minmax: true }))!;
      assert.equal(long.bucketMs! % HOST_TIER_MS, 0, 'long ranges read the host tier');
      assertMatchesBrute(long, await store.metricNames(tenantA, long.metrics.keys()), samplesOf(tenantA, 'h1').filter((s) => s.ts >= T0 && s.ts <= T0 + HOURS * WINDOW_MS - 1), T0, 'host tier');
      assert.ok(tiered > 0, 'some random queries read the host tier');
    });

    test('the aggregate equals the brute-force mean over every sample of the tenant\'s hosts, from fresh, stale and no rollups alike', async () => {
      const r = prng(13);
      const tiersSeen = new Set<number | null>();
      for (let k = 0; k < 40; k++) {
        const from = T0 - WINDOW_MS + Math.floor(r() * (HOURS + 1) * WINDOW_MS);
        const to = from + Math.floor(r() * (HOURS + 1) * WINDOW_MS);
        // A few budgets small enough for hour buckets (the coarse tier), the rest anywhere.
        const points = k < 6 ? 1 + (k % 3) : 1 + Math.floor(r() * 500);
        const grid = planGrid(from, to, points, { unit: AGGREGATE_UNIT_MS, tiers: [TENANT_FINE_MS, TENANT_COARSE_MS] });
        tiersSeen.add(grid.tier);
        const got = await store.readAggregate(tenantA, { from, to, points, minmax: true });
        assert.equal(got.bucketMs, grid.width);
        assertMatchesBrute(got, await store.metricNames(tenantA, got.metrics.keys()), samplesOf(tenantA).filter((s) => s.ts >= from && s.ts <= to), from, `aggregate [${from}, ${to}] ${points}`);
        const hosts = new Set([...truth].filter(([key, rows]) => key.startsWith(`${tenantA}/`) && [...rows.keys()].some((t) => t >= from && t <= to)).map(([key]) => key));
        assert.equal(got.hosts, hosts.size, 'hosts with a report in the range');
      }
      assert.deepEqual([...tiersSeen].sort(), [TENANT_FINE_MS, TENANT_COARSE_MS, null].sort(), 'raw, fine and coarse tiers were all exercised');
      const other = await store.readAggregate(tenantB, { from: T0, to: NOW, points: 10, minmax: false });
      assert.equal(other.hosts, 1, 'another tenant\'s aggregate holds only its own host');
    });

    test('retention drops whole blocks only, and hosts left with nothing', async () => {
      const cutoff = T0 + 2 * WINDOW_MS + 1;
      await store.deleteBefore(cutoff);
      const got = (await store.readHostSeries(tenantA, 'h1', { from: 0, to: NOW, points: 100_000, minmax: false }))!;
      // The block of [T0+2h, T0+3h) straddles the cutoff: kept whole until its window is past.
      assert.equal(got.timestamps[0], samplesOf(tenantA, 'h1').map((s) => s.ts).filter((t) => t >= T0 + 2 * WINDOW_MS).sort((a, b) => a - b)[0]);
      await store.deleteBefore(NOW + WINDOW_MS);
      assert.deepEqual(await store.listHosts(tenantA), []);
    });
  });
}
