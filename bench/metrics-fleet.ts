// A large live fleet: every host's current window is in the head (the raw rows not yet sealed), and reports keep
// arriving at the fleet's pace. Measures what an agent waits for an acknowledgement then, which the background
// passes over the head (finding windows to seal, rolling up tenants) must not hold up however many hosts there are.
// With --closed the head's windows have just closed instead (the top of the hour, its grace over): the live reports
// arrive while every host's window is sealed.
//
//   npm run bench -- metrics-fleet [--hosts 10000] [--head 120] [--rate 1000] [--seconds 20] [--closed] [--backends sqlite,postgres]
//
// The service runs in this process on its own clock: 40 minutes into an hour window (with --closed, 3 minutes), so
// the run crosses no window end. Report values come from the peers' generator (../shared/bench-peers/gen.mjs,
// seed 42), one report shape per host.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { buildMetricsApp } from '../src/metrics/app.js';
import { createMetricsDeps } from '../src/metrics/deps.js';
import { issueToken } from '../src/metrics/domain/tenant-tokens.js';
import { WINDOW_MS } from '../src/metrics/storage/engine/windows.js';
import { benchMetricsConfig } from './lib/metrics-config.js';
import { onFreshSchema } from './lib/postgres.js';
import { fmt, pool, quantile } from './lib/numbers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const GEN = path.resolve(here, '../../shared/bench-peers/gen.mjs');
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
const TENANTS = 10;
const INTERVAL_MS = 10_000;

interface Gen {
  defaults(o: Record<string, unknown>): Record<string, unknown>;
  generate(o: Record<string, unknown>): Iterable<Array<unknown>>;
  toReport(s: unknown): Record<string, unknown> & { ts: number; agentId: string };
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: {
    hosts: { type: 'string', default: '10000' }, head: { type: 'string', default: '120' }, rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '20' }, closed: { type: 'boolean', default: false }, backends: { type: 'string', default: 'sqlite,postgres' },
  } });
  const closed = values.closed!;
  const hosts = Number(values.hosts);
  const head = Number(values.head);
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const gen = (await import(pathToFileURL(GEN).href)) as Gen;
  const shapes = [...gen.generate(gen.defaults({ hosts, reports: 1, batch: 1_000_000 }))].flat().map((s, i) => ({ ...gen.toReport(s), agentId: `host-${i}` }));

  const rows: string[] = [];
  for (const backend of values.backends!.split(',') as Array<'sqlite' | 'postgres'>) {
    const r = backend === 'postgres'
      ? await onFreshSchema(PG_URL, `fleet_${process.pid}`, () => runBackend(backend, `fleet_${process.pid}`, { shapes, head, rate, seconds, closed }))
      : await runBackend(backend, undefined, { shapes, head, rate, seconds, closed });
    rows.push(`| ${backend} | ${fmt(r.headRows)} | ${fmt(r.headRowsAfter)} | ${fmt(r.sent)} (${fmt(r.sent / seconds)}/s) | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(0)} | ${r.over100} |`);
  }
  return [
    `Command: \`npm run bench -- metrics-fleet --hosts ${hosts} --head ${head} --rate ${rate} --seconds ${seconds}${closed ? ' --closed' : ''}\`.`,
    '',
    `${fmt(hosts)} hosts in ${TENANTS} tenants, each with ${head} reports of its ${closed ? 'last window, closed 3 minutes ago (every one of them due a seal),' : 'current (open) window'} already in the head, loaded`,
    `by bulk bodies; then ${seconds} s of one-report requests at ${fmt(rate)} reports/s, the pace of ${fmt(rate * INTERVAL_MS / 1000)} agents`,
    'reporting every 10 s, sent open-loop (at most 512 in flight), each answered once durable. The service runs in the',
    "benchmark's process, its writer on its own thread.",
    '',
    '| backend | head rows before | head rows after | reports sent | ack p50 (ms) | ack p99 (ms) | ack max (ms) | acks over 100 ms |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}

interface Input {
  shapes: Array<Record<string, unknown> & { ts: number; agentId: string }>;
  head: number;
  rate: number;
  seconds: number;
  closed: boolean;
}

async function runBackend(backend: 'sqlite' | 'postgres', schema: string | undefined, input: Input) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'metrics-fleet-'));
  const config = benchMetricsConfig({ dataDir, databaseUrl: backend === 'postgres' ? PG_URL : undefined, dbSchema: schema });
  // 40 minutes into the window before the current one: the head's rows and the live reports share one open window.
  // Closed: 3 minutes into it, the head's rows in the window before, whose grace (2 minutes) is over.
  const base = Math.floor(Date.now() / WINDOW_MS) * WINDOW_MS - WINDOW_MS + (input.closed ? 3 : 40) * 60_000;
  const headEnd = input.closed ? Math.floor(base / WINDOW_MS) * WINDOW_MS : base;
  const started = Date.now();
  const now = () => base + (Date.now() - started);
  const deps = await createMetricsDeps(config, { now });
  const app = await buildMetricsApp(config, deps);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  try {
    const tokens = await Promise.all(Array.from({ length: TENANTS }, (_, t) => issueToken(deps.store, `fleet-${t}`).then((i) => i.token)));
    const tokenOf = (host: number) => tokens[host % TENANTS]!;

    // The head: `head` reports per host, 10 s apart, ending just before headEnd; bodies of 1,000 reports of one tenant.
    const bodies: Array<{ token: string; body: string }> = [];
    for (let t = 0; t < TENANTS; t++) {
      let lines: string[] = [];
      for (let k = 0; k < input.head; k++) {
        for (let h = t; h < input.shapes.length; h += TENANTS) {
          lines.push(JSON.stringify({ ...input.shapes[h], ts: headEnd - (input.head - k) * INTERVAL_MS }));
          if (lines.length === 1000) { bodies.push({ token: tokens[t]!, body: lines.join('\n') }); lines = []; }
        }
      }
      if (lines.length) bodies.push({ token: tokens[t]!, body: lines.join('\n') });
    }
    await pool(bodies, 4, async (b) => {
      const res = await fetch(`${url}/api/v1/ingest/bulk`, { method: 'POST', headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/x-ndjson' }, body: b.body });
      const answer = (await res.json()) as { rejected: number };
      if (res.status !== 200 || answer.rejected) throw new Error(`bulk ingest answered ${res.status}: ${JSON.stringify(answer).slice(0, 300)}`);
    });
    const headRows = await countHead(deps);

    // The live phase: open loop, `rate` reports a second in 10 ms ticks, hosts in turn.
    const latencies: number[] = [];
    let inFlight = 0;
    let sent = 0;
    let host = 0;
    const failures: string[] = [];
    const end = performance.now() + input.seconds * 1000;
    const t0 = performance.now();
    while (performance.now() < end) {
      const due = Math.floor(((performance.now() - t0) / 1000) * input.rate);
      while (sent < due && inFlight < 512) {
        const h = host++ % input.shapes.length;
        const body = JSON.stringify({ ...input.shapes[h], ts: now() });
        sent++;
        inFlight++;
        const begun = performance.now();
        void fetch(`${url}/api/v1/ingest`, { method: 'POST', headers: { authorization: `Bearer ${tokenOf(h)}`, 'content-type': 'application/json' }, body })
          .then(async (res) => { await res.arrayBuffer(); if (res.status !== 200) failures.push(String(res.status)); latencies.push(performance.now() - begun); })
          .catch((e: unknown) => { failures.push(String(e)); })
          .finally(() => { inFlight--; });
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    while (inFlight) await new Promise((r) => setTimeout(r, 10));
    if (failures.length) throw new Error(`${failures.length} live reports failed, first: ${failures[0]}`);
    const sorted = latencies.sort((a, b) => a - b);
    return { headRows, headRowsAfter: await countHead(deps), sent, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1]!, over100: sorted.filter((l) => l > 100).length };
  } finally {
    await app.close();
    await deps.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function countHead(deps: Awaited<ReturnType<typeof createMetricsDeps>>): Promise<number> {
  if (deps.database.sqlite) return (deps.database.sqlite.prepare('SELECT count(*) AS n FROM reports').get() as { n: number }).n;
  const r = await deps.database.pgPool!.query<{ n: string }>('SELECT count(*) AS n FROM reports');
  return Number(r.rows[0]!.n);
}
