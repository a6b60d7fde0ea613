// Metrics service benchmark: ingest throughput over HTTP and series latency
// for one host over one day of 10 s reports, on SQLite and PostgreSQL.
//
//   npm run bench -- metrics [--hosts 50] [--steps 200] [--concurrency 32] [--queries 30] [--backends sqlite,postgres]
//
// Data comes from the peers' deterministic generator (../shared/bench-peers/gen.mjs,
// seed 42, 2023-11-14), the same fleet VictoriaMetrics and InfluxDB were measured on.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { dropSchema } from './lib/postgres.js';
import { buildMetricsApp } from '../src/metrics/app.js';
import { createMetricsDeps } from '../src/metrics/deps.js';
import { issueToken } from '../src/metrics/domain/tenant-tokens.js';
import { benchMetricsConfig } from './lib/metrics-config.js';
import { fmt, pool, quantile } from './lib/numbers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const GEN = path.resolve(here, '../../shared/bench-peers/gen.mjs');
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

interface Sample { h: { tenant: string; agentId: string }; ts: number; v: Float64Array }
interface Gen {
  defaults(o: Record<string, unknown>): Record<string, unknown> & { start: number; interval: number };
  generate(o: Record<string, unknown>): Iterable<Sample[]>;
  toReport(s: Sample): Record<string, unknown>;
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      hosts: { type: 'string', default: '50' },
      steps: { type: 'string', default: '200' },
      concurrency: { type: 'string', default: '32' },
      queries: { type: 'string', default: '30' },
      backends: { type: 'string', default: 'sqlite,postgres' },
    },
  });
  const gen = (await import(pathToFileURL(GEN).href)) as Gen;
  const hosts = Number(values.hosts);
  const steps = Number(values.steps);
  const concurrency = Number(values.concurrency);
  const queries = Number(values.queries);

  // Bodies are built before the clock starts, as the peers' loader does.
  const fleetOpts = gen.defaults({ hosts, reports: steps, batch: 1_000_000 });
  const fleet = [...gen.generate(fleetOpts)].flat().map((s) => ({ tenant: s.h.tenant, body: JSON.stringify(gen.toReport(s)) }));
  const dayOpts = gen.defaults({ hosts: 1, reports: 8640, batch: 1_000_000, seed: 7 });
  const day = [...gen.generate(dayOpts)].flat();
  const dayBodies = day.map((s) => JSON.stringify(gen.toReport(s)));
  const dayHost = day[0]!.h.agentId;
  const dayMean = day.reduce((a, s) => a + s.v[0]!, 0) / day.length;

  const loadBefore = os.loadavg()[0]!;
  const rows: string[] = [];
  for (const backend of values.backends.split(',')) {
    const r = await runBackend(backend as 'sqlite' | 'postgres', { fleet, fleetSpanMs: (steps + 1) * 10_000, dayBodies, dayHost, dayStart: dayOpts.start, concurrency, queries });
    const meanOk = Math.abs(r.dayMean - dayMean) < 1e-6 ? 'matches' : `MISMATCH ${r.dayMean} vs ${dayMean}`;
    rows.push(`| ${backend} | ${fmt(r.reportsPerS)} | ${fmt(r.reportsPerS * 28)} | ${fmt(r.bulkSamplesPerS)} | ${r.ingestP50.toFixed(1)} / ${r.ingestP95.toFixed(1)} | ${r.seriesP50.toFixed(1)} / ${r.seriesP95.toFixed(1)} | ${r.aggP50.toFixed(1)} / ${r.aggP95.toFixed(1)} | ${r.bytesPerSample.toFixed(1)} | ${meanOk} |`);
  }
  return [
    `Command: \`npm run bench -- metrics --hosts ${hosts} --steps ${steps} --concurrency ${concurrency} --queries ${queries}\`.`,
    '',
    `Ingest: ${fmt(fleet.length)} reports (${hosts} hosts x ${steps} steps of 10 s, 28 metrics each, 5 tenants) from the peers' generator`,
    `(\`../shared/bench-peers/gen.mjs\`, seed 42), one report per HTTP POST, ${concurrency} requests in flight, each answered only after`,
    'its group-committed transaction is durable (SQLite WAL with synchronous=FULL; PostgreSQL default synchronous_commit=on).',
    'Bulk: the same fleet again, one generator span later, as NDJSON bodies of 1,000 reports to `POST /api/v1/ingest/bulk`, 4 in flight (each body one durable commit).',
    `Series: one host with one day of 10 s reports (8,640 reports, 241,920 samples); \`GET /api/v1/host/:id\` over the whole day`,
    `with the default budget of 500 points (173 s buckets, the peers' step), ${queries} runs after 3 warm-ups. Aggregate: \`GET /api/v1/aggregate\``,
    `over one tenant of the ingest fleet (${hosts / 5} hosts x ${steps} reports). Bytes/sample: head, blocks and tenant rollups with their indexes, after sealing, over stored samples.`,
    '',
    '| backend | reports/s | samples/s | bulk samples/s | ingest latency p50 / p95 (ms) | host day series p50 / p95 (ms) | tenant aggregate p50 / p95 (ms) | bytes/sample | day mean of cpu.usage |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...rows,
    '',
    `1-minute load average when the run started: ${loadBefore.toFixed(1)} on ${os.cpus().length} cores (the server, the load generator and any other work share them).`,
    '',
    'The peers (`../shared/bench-peers/`) batch 1,000 reports per write request, so their samples/s are not per-report',
    'HTTP figures; their own run on this machine is in "Against the peers" below. Each of our reports is one durable request,',
    'the unit an agent sends.',
  ].join('\n');
}

interface BackendInput {
  fleet: Array<{ tenant: string; body: string }>;
  /** How far the bulk phase shifts the fleet's timestamps so its reports are new. */
  fleetSpanMs: number;
  dayBodies: string[];
  dayHost: string;
  dayStart: number;
  concurrency: number;
  queries: number;
}

async function runBackend(backend: 'sqlite' | 'postgres', input: BackendInput) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'metrics-bench-'));
  const schema = `bench_${process.pid}`;
  // The generator's data is dated 2023: keep it all.
  const config = benchMetricsConfig({ dataDir, databaseUrl: backend === 'postgres' ? PG_URL : undefined, dbSchema: schema }, { retentionDays: 36_500 });
  if (backend === 'postgres') await dropSchema(PG_URL, schema);
  const deps = await createMetricsDeps(config);
  const app = await buildMetricsApp(config, deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  try {
    const tokens = new Map<string, string>();
    for (const t of new Set(input.fleet.map((f) => f.tenant))) tokens.set(t, (await issueToken(deps.store, `bench-${t}`)).token);
    const dayToken = (await issueToken(deps.store, 'bench-day')).token;

    const post = async (token: string, body: string) => {
      const res = await fetch(`${url}/api/v1/ingest`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`ingest answered ${res.status}`);
    };
    const latencies: number[] = [];
    const started = performance.now();
    await pool(input.fleet, input.concurrency, async (f) => {
      const t0 = performance.now();
      await post(tokens.get(f.tenant)!, f.body);
      latencies.push(performance.now() - t0);
    });
    const reportsPerS = input.fleet.length / ((performance.now() - started) / 1000);
    const sortedLatencies = latencies.sort((a, b) => a - b);

    // Bulk: the same fleet shifted one generator span later (new reports), NDJSON bodies of 1,000 reports, 4 in flight.
    const shift = input.fleetSpanMs;
    const bulkBodies: Array<{ tenant: string; body: string }> = [];
    const byTenant = new Map<string, string[]>();
    for (const f of input.fleet) {
      const r = JSON.parse(f.body) as { ts: number };
      r.ts += shift;
      let lines = byTenant.get(f.tenant);
      if (!lines) byTenant.set(f.tenant, (lines = []));
      lines.push(JSON.stringify(r));
      if (lines.length === 1000) { bulkBodies.push({ tenant: f.tenant, body: lines.join('\n') }); byTenant.set(f.tenant, []); }
    }
    for (const [tenant, lines] of byTenant) if (lines.length) bulkBodies.push({ tenant, body: lines.join('\n') });
    const bulkStarted = performance.now();
    await pool(bulkBodies, 4, async (b) => {
      const res = await fetch(`${url}/api/v1/ingest/bulk`, { method: 'POST', headers: { authorization: `Bearer ${tokens.get(b.tenant)!}`, 'content-type': 'application/x-ndjson' }, body: b.body });
      const answer = (await res.json()) as { stored: number; rejected: number };
      if (res.status !== 200 || answer.rejected) throw new Error(`bulk ingest answered ${res.status}: ${JSON.stringify(answer).slice(0, 300)}`);
    });
    const bulkSamplesPerS = (input.fleet.length * 28) / ((performance.now() - bulkStarted) / 1000);

    await pool(input.dayBodies, input.concurrency, (b) => post(dayToken, b));
    // The generator's windows are all closed: seal and roll up now rather than wait for the background passes.
    await deps.store.flush();
    const from = input.dayStart;
    const to = input.dayStart + 86_400_000 + 10_000;
    const get = async (token: string, p: string) => {
      const res = await fetch(url + p, { headers: { authorization: `Bearer ${token}` } });
      if (res.status !== 200) throw new Error(`${p} answered ${res.status}`);
      return (await res.json()) as { timestamps: number[]; metrics: Record<string, (number | null)[]> };
    };
    const seriesPath = `/api/v1/host/${input.dayHost}?from=${from}&to=${to}`;
    const series = await timeRuns(input.queries, () => get(dayToken, seriesPath));
    const usage = series.last.metrics['cpu.usage']!;
    // The bucket means weighted by their report counts give the day mean; buckets are 173 s, so up to 18 reports each.
    const dayRaw = await get(dayToken, `${seriesPath}&points=10000`);
    const dayMean = dayRaw.metrics['cpu.usage']!.reduce<number>((a, v) => a + (v ?? 0), 0) / dayRaw.timestamps.length;
    if (usage.length === 0) throw new Error('empty series');

    const aggToken = tokens.values().next().value!;
    const agg = await timeRuns(input.queries, () => get(aggToken, `/api/v1/aggregate?from=${from}&to=${to}`));

    const bytes = backend === 'sqlite' ? sqliteReportBytes(deps.database.sqlite!) : await pgReportBytes(schema);
    const samples = (2 * input.fleet.length + input.dayBodies.length) * 28;
    return {
      reportsPerS,
      ingestP50: quantile(sortedLatencies, 0.5),
      ingestP95: quantile(sortedLatencies, 0.95),
      seriesP50: series.p50,
      seriesP95: series.p95,
      aggP50: agg.p50,
      aggP95: agg.p95,
      bytesPerSample: bytes / samples,
      bulkSamplesPerS,
      dayMean,
    };
  } finally {
    await app.close();
    await deps.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (backend === 'postgres') await dropSchema(PG_URL, schema);
  }
}

async function timeRuns<T>(n: number, fn: () => Promise<T>): Promise<{ p50: number; p95: number; last: T }> {
  let last = await fn();
  for (let i = 0; i < 2; i++) last = await fn();
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    last = await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: quantile(times, 0.5), p95: quantile(times, 0.95), last };
}

function sqliteReportBytes(db: { pragma(s: string): unknown; prepare(s: string): { get(): unknown } }): number {
  db.pragma('wal_checkpoint(TRUNCATE)');
  const row = db.prepare(`select sum(pgsize) as bytes from dbstat where name in ('reports', 'blocks', 'tenant_windows')
    or name like 'sqlite_autoindex_blocks%' or name like 'sqlite_autoindex_tenant_windows%' or name = 'blocks_window_start'`).get() as { bytes: number };
  return row.bytes;
}

async function pgReportBytes(schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    let bytes = 0;
    for (const table of ['reports', 'blocks', 'tenant_windows']) {
      await client.query(`VACUUM ANALYZE "${schema}".${table}`);
      const r = await client.query<{ bytes: string }>(`select pg_total_relation_size('"${schema}".${table}') as bytes`);
      bytes += Number(r.rows[0]!.bytes);
    }
    return bytes;
  } finally {
    await client.end();
  }
}

