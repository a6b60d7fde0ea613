// Sync service benchmark: push and pull throughput (changes/s) over HTTP, and
// feed latency from sending a push to the WebSocket message, on SQLite and
// PostgreSQL (fresh schema), the service in this process on a loopback port.
//
// Then a fresh client of the library (src/client, SQLite store) syncs the whole business, topped up to
// --initial records (0 skips it).
//
//   npm run bench -- sync [--devices 8] [--pushes 40] [--batch 100] [--page 1000] [--latency 200] [--initial 100000] [--backends sqlite,postgres]
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import WebSocket from 'ws';
import { buildSyncApp } from '../src/sync/app.js';
import { loadSyncConfig, type SyncConfig } from '../src/sync/config.js';
import { createSyncDeps } from '../src/sync/deps.js';
import { SyncClient } from '../src/client/index.js';
import { createSqliteStore } from '../src/client/sqlite.js';

const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

interface Options { devices: number; pushes: number; batch: number; page: number; latency: number; initial: number }
interface Result { pushPerS: number; pushMs: number; pullPerS: number; pullMs: number; total: number; p50: number; p95: number; pushCpuUs: number; pullCpuUs: number; initialMs: number; initialRecords: number }

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      devices: { type: 'string', default: '8' },
      pushes: { type: 'string', default: '40' },
      batch: { type: 'string', default: '100' },
      page: { type: 'string', default: '1000' },
      latency: { type: 'string', default: '200' },
      initial: { type: 'string', default: '100000' },
      backends: { type: 'string', default: 'sqlite,postgres' },
    },
  });
  const o: Options = { devices: Number(values.devices), pushes: Number(values.pushes), batch: Number(values.batch), page: Number(values.page), latency: Number(values.latency), initial: Number(values.initial) };
  const load = os.loadavg()[0]!.toFixed(1);
  const rows: string[] = [];
  for (const backend of values.backends.split(',')) {
    const r = await runBackend(backend as 'sqlite' | 'postgres', o);
    rows.push(`| ${backend} | ${fmt(r.pushPerS)} | ${r.pushCpuUs.toFixed(1)} | ${fmt(r.pullPerS)} | ${r.pullCpuUs.toFixed(1)} | ${r.p50.toFixed(1)} / ${r.p95.toFixed(1)} | ${r.initialRecords ? `${(r.initialMs / 1000).toFixed(2)} s (${fmt(r.initialRecords)})` : '-'} |`);
  }
  return [
    `Command: \`npm run bench -- sync --devices ${o.devices} --pushes ${o.pushes} --batch ${o.batch} --page ${o.page} --latency ${o.latency}\``,
    '',
    `Push: ${o.devices} devices push concurrently, each ${o.pushes} pushes of ${o.batch} new records (${fmt(o.devices * o.pushes * o.batch)} changes), one HTTP request per push;`,
    'pushes that arrive while another is committing share the next transaction (group commit, docs/sync-api.md).',
    `Pull: one client pulls all of them from version 0 in pages of ${o.page}. Feed latency: ${o.latency} sequential one-change pushes,`,
    'each timed from sending the push request to the WebSocket message for that record on a subscriber of the business.',
    'SQLite runs with synchronous=FULL (every commit fsynced); PostgreSQL with its defaults (fsync on commit), on the same machine.',
    'CPU µs/change is the CPU time of this process (service and clients; not the PostgreSQL server) per change: steadier than',
    'wall-clock rates when the machine is shared.',
    '',
    `Initial sync: the business is topped up to ${fmt(o.initial)} records, then a fresh client of the library (src/client, SQLite store,`,
    'synchronous=FULL) signs in and runs sync() until it holds every record.',
    '',
    '| Backend | Push (changes/s) | Push CPU (µs/change) | Pull (changes/s) | Pull CPU (µs/change) | Feed latency p50 / p95 (ms) | Client initial sync (records) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
    '',
    `1-minute load average when the run started: ${load} on ${os.cpus().length} cores (the server, the clients and any other work share them).`,
  ].join('\n');
}

async function runBackend(backend: 'sqlite' | 'postgres', o: Options): Promise<Result> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sync-bench-'));
  const schema = `bench_sync_${process.pid}`;
  const config: SyncConfig = {
    ...loadSyncConfig(),
    dataDir,
    databaseUrl: backend === 'postgres' ? PG_URL : undefined,
    dbSchema: schema,
    logLevel: 'warn',
    userRateLimit: 1_000_000,
    ipRateLimit: 1_000_000,
    scryptLog2N: 10,
    pullPageMax: Math.max(o.page, 1000),
  };
  if (backend === 'postgres') await dropSchema(schema);
  const deps = await createSyncDeps(config);
  const app = await buildSyncApp(deps);
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const addr = app.server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    const url = `http://127.0.0.1:${addr.port}`;
    const email = `bench-${randomUUID()}@example.com`;
    const reg = await json(url, 'POST', '/api/auth/register', undefined, { email, name: 'Bench', password: 'bench-password-123' });
    const token = reg.token as string;
    const userId = (reg.user as { id: string }).id;
    const business = await json(url, 'POST', '/api/business', token, { name: 'Bench Pty Ltd', abn: '51824753556' });
    const businessId = business.id as string;

    // Push throughput.
    const bodies = Array.from({ length: o.devices }, (_, d) => Array.from({ length: o.pushes }, () => JSON.stringify({
      business_id: businessId, instance_id: `bench-${d}`, branch: 'main', tombstones: [],
      changes: Array.from({ length: o.batch }, (_, i) => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { name: `Customer ${i}`, email: `c${i}@example.com`, balance: i * 1.5, tags: ['a', 'b'] } })),
    })));
    const headers = { authorization: `Bearer ${token}`, 'x-business-id': businessId, 'content-type': 'application/json' };
    let t0 = performance.now();
    let cpu0 = process.cpuUsage();
    await Promise.all(bodies.map(async (list) => {
      for (const body of list) {
        const r = await fetch(`${url}/api/sync/push`, { method: 'POST', headers, body });
        const b = (await r.json()) as { accepted: number };
        if (r.status !== 200 || b.accepted !== o.batch) throw new Error(`push failed: ${r.status} ${JSON.stringify(b)}`);
      }
    }));
    const pushMs = performance.now() - t0;
    const pushCpu = cpuMicros(process.cpuUsage(cpu0));
    const total = o.devices * o.pushes * o.batch;

    // Pull throughput.
    t0 = performance.now();
    cpu0 = process.cpuUsage();
    let version = 0;
    let pulled = 0;
    for (;;) {
      const r = await json(url, 'POST', '/api/sync/pull', token, { since_version: version, limit: o.page }, businessId);
      pulled += (r.changes as unknown[]).length;
      version = r.version as number;
      if (!r.has_more) break;
    }
    const pullMs = performance.now() - t0;
    const pullCpu = cpuMicros(process.cpuUsage(cpu0));
    if (pulled !== total) throw new Error(`pulled ${pulled} of ${total}`);

    // Feed latency: push one change, wait for its message.
    const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/sync?business_id=${businessId}&user_id=${userId}`, { headers: { authorization: `Bearer ${token}` } });
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    const waiting = new Map<string, () => void>();
    ws.on('message', (data) => waiting.get((JSON.parse(String(data)) as { record_uuid: string }).record_uuid)?.());
    const latencies: number[] = [];
    for (let i = 0; i < o.latency; i++) {
      const rec = randomUUID();
      const body = JSON.stringify({ business_id: businessId, instance_id: 'bench-latency', branch: 'main', changes: [{ table_name: 'customers', record_uuid: rec, version: 1, operation: 'create', data: { i } }], tombstones: [] });
      const start = performance.now();
      const heard = new Promise<void>((resolve) => waiting.set(rec, resolve));
      const r = await fetch(`${url}/api/sync/push`, { method: 'POST', headers, body });
      await r.arrayBuffer();
      await heard;
      latencies.push(performance.now() - start);
      waiting.delete(rec);
    }
    ws.close();
    latencies.sort((a, b) => a - b);

    // Initial sync of a fresh client through the library.
    let initialMs = 0;
    const initialRecords = o.initial ? Math.max(o.initial, total + o.latency) : 0;
    if (initialRecords) {
      for (let have = total + o.latency; have < initialRecords; have += 1000) {
        const n = Math.min(1000, initialRecords - have);
        await json(url, 'POST', '/api/sync/push', token, {
          business_id: businessId, instance_id: 'bench-fill',
          changes: Array.from({ length: n }, (_, i) => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { name: `Customer ${i}`, email: `c${i}@example.com`, balance: i * 1.5, tags: ['a', 'b'] } })),
        }, businessId);
      }
      const client = await SyncClient.open({ baseUrl: url, businessId, store: createSqliteStore(path.join(dataDir, 'client.sqlite')) });
      await client.login({ email, password: 'bench-password-123' });
      t0 = performance.now();
      await client.sync();
      initialMs = performance.now() - t0;
      const held = (await client.list('customers')).length;
      await client.close();
      if (held !== initialRecords) throw new Error(`the client holds ${held} of ${initialRecords} records`);
    }
    return {
      pushPerS: total / (pushMs / 1000), pushMs, pullPerS: total / (pullMs / 1000), pullMs, total,
      p50: quantile(latencies, 0.5), p95: quantile(latencies, 0.95),
      pushCpuUs: pushCpu / total, pullCpuUs: pullCpu / total, initialMs, initialRecords,
    };
  } finally {
    await app.close();
    await deps.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (backend === 'postgres') await dropSchema(schema);
  }
}

async function json(url: string, method: string, p: string, token: string | undefined, body: unknown, businessId?: string): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers['authorization'] = `Bearer ${token}`;
  if (businessId) headers['x-business-id'] = businessId;
  const r = await fetch(url + p, { method, headers, body: JSON.stringify(body) });
  const out = (await r.json()) as Record<string, unknown>;
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(out)}`);
  return out;
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try { await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`); } finally { await client.end(); }
}

function cpuMicros(u: NodeJS.CpuUsage): number {
  return u.user + u.system;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
