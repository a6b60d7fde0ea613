// Sync service benchmark: push and pull throughput (changes/s) over HTTP, and
// feed latency from sending a push to the WebSocket message, on SQLite and
// PostgreSQL (fresh schema), the service in this process on a loopback port.
//
// Then, each phase skipped with 0: fresh clients of the library (src/client, SQLite stores, in a child process)
// sync the whole business topped up to --initial records, one client alone and --initial-clients at once; and
// --feed-sockets subscribers (in a child process), spread over each of --feed-businesses business counts in turn,
// get --feed-pushes one-change pushes.
//
//   npm run bench -- sync [--devices 8] [--pushes 40] [--batch 100] [--page 1000] [--latency 200]
//     [--initial 100000] [--initial-clients 50] [--feed-sockets 5000] [--feed-pushes 200] [--feed-businesses 1,500]
//     [--backends sqlite,postgres]
//
// PostgreSQL: database bench_sync at 127.0.0.1 (created if missing; BENCH_DATABASE_URL to change), so its
// backends' CPU (from /proc) is this benchmark's alone.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { loadSyncConfig } from '../src/sync/config.js';
import { feedFanOut, type FanOut } from './lib/feed-fanout.js';
import { initialSync, type InitialSync } from './lib/initial-sync.js';
import { pgCpu } from './lib/postgres.js';
import { jsonRequest } from './lib/json-request.js';
import { startBenchSync } from './lib/sync-service.js';
import { fmt, quantile } from './lib/numbers.js';

const PG_URL = process.env['BENCH_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/bench_sync';
const PG_DB = new URL(PG_URL).pathname.slice(1);

interface Options { devices: number; pushes: number; batch: number; page: number; latency: number; initial: number; initialClients: number; feedSockets: number; feedPushes: number; feedBusinesses: number[] }
interface Result {
  pushPerS: number; pullPerS: number; p50: number; p95: number;
  pushCpuUs: number; pushPgUs: number; pullCpuUs: number; pullPgUs: number;
  initial?: InitialSync; crowd?: InitialSync; feed: FanOut[];
}

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
      'initial-clients': { type: 'string', default: '50' },
      'feed-sockets': { type: 'string', default: '5000' },
      'feed-pushes': { type: 'string', default: '200' },
      'feed-businesses': { type: 'string', default: '1,500' },
      backends: { type: 'string', default: 'sqlite,postgres' },
    },
  });
  const o: Options = {
    devices: Number(values.devices), pushes: Number(values.pushes), batch: Number(values.batch), page: Number(values.page), latency: Number(values.latency),
    initial: Number(values.initial), initialClients: Number(values['initial-clients']), feedSockets: Number(values['feed-sockets']), feedPushes: Number(values['feed-pushes']),
    feedBusinesses: values['feed-businesses'].split(',').map(Number),
  };
  const load = os.loadavg()[0]!.toFixed(1);
  const results: [string, Result][] = [];
  for (const backend of values.backends.split(',')) results.push([backend, await runBackend(backend as 'sqlite' | 'postgres', o)]);
  const pgUs = (backend: string, us: number) => (backend === 'postgres' ? us.toFixed(1) : '-');
  const out = [
    `Command: \`npm run bench -- sync --devices ${o.devices} --pushes ${o.pushes} --batch ${o.batch} --page ${o.page} --latency ${o.latency} --initial ${o.initial} --initial-clients ${o.initialClients} --feed-sockets ${o.feedSockets} --feed-pushes ${o.feedPushes} --feed-businesses ${o.feedBusinesses.join(',')}\``,
    '',
    `Push: ${o.devices} devices push concurrently, each ${o.pushes} pushes of ${o.batch} new records (${fmt(o.devices * o.pushes * o.batch)} changes), one HTTP request per push;`,
    'pushes that arrive while another is committing share the next transaction (group commit, docs/sync-api.md).',
    `Pull: one client pulls all of them from version 0 in pages of ${o.page}. Feed latency: ${o.latency} sequential one-change pushes,`,
    'each timed from sending the push request to the WebSocket message for that record on a subscriber of the business.',
    'SQLite runs with synchronous=FULL (every commit fsynced); PostgreSQL with its defaults (fsync on commit), on the same machine.',
    'Service CPU µs/change is the CPU time of this process (service, push thread and the HTTP clients) per change; PostgreSQL CPU',
    'µs/change is that of the database\'s backends (from /proc). Both are steadier than wall-clock rates when the machine is shared.',
    '',
    '| Backend | Push (changes/s) | Push CPU service / PostgreSQL (µs/change) | Pull (changes/s) | Pull CPU service / PostgreSQL (µs/change) | Feed latency p50 / p95 (ms) |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...results.map(([b, r]) => `| ${b} | ${fmt(r.pushPerS)} | ${r.pushCpuUs.toFixed(1)} / ${pgUs(b, r.pushPgUs)} | ${fmt(r.pullPerS)} | ${r.pullCpuUs.toFixed(1)} / ${pgUs(b, r.pullPgUs)} | ${r.p50.toFixed(1)} / ${r.p95.toFixed(1)} |`),
  ];
  if (o.initial) {
    out.push(
      '',
      `Initial sync: the business is topped up to ${fmt(o.initial)} records; fresh clients of the library (src/client, SQLite stores, its default pages)`,
      'sign in and run sync() until they hold every record, in a child process (as devices are), first one alone, then',
      `${o.initialClients} at once. Service CPU covers this process (serving the pulls); client CPU the child's (applying them).`,
      'Requests: what one client\'s sync() sent, each counted by the user\'s rate limit (100 a minute by default; lifted here).',
      'Retried: rounds that failed for the network and were run again, as an app\'s background sync would (causes below the table).',
      '',
      '| Backend | Clients | Wall (s) | Per client p50 / max (s) | Records/s served | Service CPU (µs/record) | PostgreSQL CPU (µs/record) | Client CPU (µs/record) | Requests per client | Retried |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...results.flatMap(([b, r]) => [r.initial, r.crowd].filter((x): x is InitialSync => x !== undefined).map((x) =>
        `| ${b} | ${x.clients} | ${(x.wallMs / 1000).toFixed(2)} | ${(x.p50Ms / 1000).toFixed(2)} / ${(x.maxMs / 1000).toFixed(2)} | ${fmt(x.recordsPerS)} | ${x.serviceUs.toFixed(1)} | ${pgUs(b, x.pgUs)} | ${x.clientUs.toFixed(1)} | ${x.requestsPerClient.toFixed(0)} | ${x.retries} |`)),
      ...results.flatMap(([b, r]) => [r.initial, r.crowd].filter((x): x is InitialSync => x !== undefined && x.retries > 0)
        .map((x) => `\nRetried rounds (${b}, ${x.clients} clients): ${x.retryCauses.join('; ')}.`)),
    );
  }
  if (o.feedSockets) {
    out.push(
      '',
      `Feed fan-out: ${fmt(o.feedSockets)} change-feed WebSockets (opened from a child process) spread evenly over 1 or more businesses, then`,
      `${o.feedPushes} sequential one-change pushes to those businesses in turn, so each push reaches the sockets of one business. Each`,
      'delivery is timed from sending the push to the message on that socket (clocks of both processes from performance.timeOrigin);',
      '"last socket" is, per push, the time until every socket of its business had it. Memory is this process\'s (the service alone)',
      'after a full garbage collection: before the sockets, with them open, half-way through the pushes and at the end.',
      '',
      '| Backend | Sockets / businesses | Delivery p50 / p95 / p99 / max (ms) | Last socket p50 / p99 (ms) | Service CPU per push (ms) | Heap MiB: before / open / half / end | RSS MiB: open / end |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...results.flatMap(([b, r]) => r.feed.map((f) =>
        `| ${b} | ${fmt(f.sockets)} / ${fmt(f.businesses)} | ${f.p50.toFixed(1)} / ${f.p95.toFixed(1)} / ${f.p99.toFixed(1)} / ${f.max.toFixed(1)} | ${f.lastP50.toFixed(1)} / ${f.lastP99.toFixed(1)} | ${f.cpuMsPerPush.toFixed(2)} | ${f.heap.map((h) => h.toFixed(0)).join(' / ')} | ${f.rss.map((h) => h.toFixed(0)).join(' / ')} |`)),
    );
  }
  out.push('', `1-minute load average when the run started: ${load} on ${os.cpus().length} cores (the service, the clients and any other work share them); ${os.loadavg()[0]!.toFixed(1)} at the end.`);
  return out.join('\n');
}

async function runBackend(backend: 'sqlite' | 'postgres', o: Options): Promise<Result> {
  const svc = await startBenchSync(backend, PG_URL, {
    pullPageMax: Math.max(o.page, loadSyncConfig().pullPageMax),
    // Fifty clients of one user pull at once: the benchmark measures capacity, so the load-shedding bounds (which would
    // answer most of them 503, and shed on a delayed event loop) are lifted.
    maxExpensiveInFlight: Math.max(16, o.initialClients * 2),
    maxExpensivePerPrincipal: Math.max(8, o.initialClients * 2),
    maxEventLoopDelayMs: 0,
    feedMaxSocketsPerUser: Math.max(20, o.feedSockets),
  });
  const pgNow = () => (backend === 'postgres' ? pgCpu(PG_DB) : 0);
  const { url, email, password, token, userId, businessId } = svc;
  try {
    // Push throughput.
    const bodies = Array.from({ length: o.devices }, (_, d) => Array.from({ length: o.pushes }, () => JSON.stringify({
      business_id: businessId, instance_id: `bench-${d}`, branch: 'main', tombstones: [],
      changes: Array.from({ length: o.batch }, (_, i) => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { name: `Customer ${i}`, email: `c${i}@example.com`, balance: i * 1.5, tags: ['a', 'b'] } })),
    })));
    const headers = { authorization: `Bearer ${token}`, 'x-business-id': businessId, 'content-type': 'application/json' };
    let t0 = performance.now();
    let cpu0 = process.cpuUsage();
    let pg0 = pgNow();
    await Promise.all(bodies.map(async (list) => {
      for (const body of list) {
        const r = await fetch(`${url}/api/sync/push`, { method: 'POST', headers, body });
        const b = (await r.json()) as { accepted: number };
        if (r.status !== 200 || b.accepted !== o.batch) throw new Error(`push failed: ${r.status} ${JSON.stringify(b)}`);
      }
    }));
    const pushMs = performance.now() - t0;
    const pushCpu = cpuMicros(process.cpuUsage(cpu0));
    const pushPg = (pgNow() - pg0) * 1e6;
    const total = o.devices * o.pushes * o.batch;

    // Pull throughput.
    t0 = performance.now();
    cpu0 = process.cpuUsage();
    pg0 = pgNow();
    let version = 0;
    let pulled = 0;
    for (;;) {
      const r = await jsonRequest(url, 'POST', '/api/sync/pull', token, { since_version: version, limit: o.page }, businessId);
      pulled += (r.changes as unknown[]).length;
      version = r.version as number;
      if (!r.has_more) break;
    }
    const pullMs = performance.now() - t0;
    const pullCpu = cpuMicros(process.cpuUsage(cpu0));
    const pullPg = (pgNow() - pg0) * 1e6;
    if (pulled !== total) throw new Error(`pulled ${pulled} of ${total}`);

    const latencies = await feedLatency(url, token, userId, businessId, o.latency, headers);
    const result: Result = {
      pushPerS: total / (pushMs / 1000), pullPerS: total / (pullMs / 1000), p50: quantile(latencies, 0.5), p95: quantile(latencies, 0.95),
      pushCpuUs: pushCpu / total, pushPgUs: pushPg / total, pullCpuUs: pullCpu / total, pullPgUs: pullPg / total, feed: [],
    };

    // Initial sync of fresh clients through the library.
    if (o.initial) {
      for (let have = total + o.latency; have < o.initial; have += 1000) {
        const n = Math.min(1000, o.initial - have);
        await jsonRequest(url, 'POST', '/api/sync/push', token, {
          business_id: businessId, instance_id: 'bench-fill',
          changes: Array.from({ length: n }, (_, i) => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { name: `Customer ${i}`, email: `c${i}@example.com`, balance: i * 1.5, tags: ['a', 'b'] } })),
        }, businessId);
      }
      const records = Math.max(o.initial, total + o.latency);
      const start = { url, businessId, email, password, records, pgNow };
      result.initial = await initialSync({ ...start, clients: 1 });
      if (o.initialClients) result.crowd = await initialSync({ ...start, clients: o.initialClients });
    }
    if (o.feedSockets) {
      const businessIds = [businessId];
      for (const n of o.feedBusinesses) {
        while (businessIds.length < n) businessIds.push((await jsonRequest(url, 'POST', '/api/business', token, { name: `Bench ${businessIds.length}`, abn: '51824753556' })).id as string);
        result.feed.push(await feedFanOut({ url, token, userId, businessIds: businessIds.slice(0, n), sockets: o.feedSockets, pushes: o.feedPushes }));
      }
    }
    return result;
  } finally {
    await svc.close();
  }
}

/** One subscriber; `n` sequential one-change pushes, each timed from sending it to its message. Sorted, in ms. */
async function feedLatency(url: string, token: string, userId: string, businessId: string, n: number, headers: Record<string, string>): Promise<number[]> {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/sync?business_id=${businessId}&user_id=${userId}`, { headers: { authorization: `Bearer ${token}` } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const waiting = new Map<string, () => void>();
  ws.on('message', (data) => waiting.get((JSON.parse(String(data)) as { record_uuid: string }).record_uuid)?.());
  const latencies: number[] = [];
  for (let i = 0; i < n; i++) {
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
  return latencies.sort((a, b) => a - b);
}



function cpuMicros(u: NodeJS.CpuUsage): number {
  return u.user + u.system;
}
