// Scale-out benchmark: ingest (metrics) and push (sync) throughput through
// HAProxy in front of one instance, then two, on PostgreSQL and Redis: the
// topology of test/scale (deploy/haproxy.cfg, real processes).
//
//   npm run bench -- scale [--seconds 10] [--concurrency 32] [--batch 10]
//
// Needs PostgreSQL, Redis and haproxy (as .ci/run provides). Every request is
// a real client request through the proxy; the limits are raised so the
// benchmark measures capacity, not the rate limiter.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { TOPOLOGY_READY, runCli, startTopology, type Topology } from '../test/helpers/topology.js';
import { makeReport } from '../test/helpers/metrics.js';
import { validAbn } from '../test/helpers/sync.js';

interface Result { ok: number; failed: number; seconds: number; p50: number; p99: number }

/** Runs `op` from `concurrency` clients for `seconds`; counts answers by outcome and latency. */
async function load(seconds: number, concurrency: number, op: (client: number, i: number) => Promise<boolean>): Promise<Result> {
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async (_, client) => {
    for (let i = 0; performance.now() < end; i++) {
      const t = performance.now();
      const good = await op(client, i).catch(() => false);
      latencies.push(performance.now() - t);
      if (good) ok++;
      else failed++;
    }
  }));
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return { ok, failed, seconds: (performance.now() - start) / 1000, p50: q(0.5), p99: q(0.99) };
}

async function post(url: string, token: string, body: unknown, headers: Record<string, string> = {}): Promise<number> {
  const r = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  await r.arrayBuffer();
  return r.status;
}

async function ingestRun(instances: number, seconds: number, concurrency: number): Promise<Result> {
  const topo = await startTopology({ service: 'metrics', instances });
  try {
    const created = await runCli('metrics', ['token', 'create', 'bench', ...topo.sharedArgs]);
    const token = /token:\s+(\S+)/.exec(created.stdout)![1]!;
    const base = Date.now() - 3_600_000;
    return await load(seconds, concurrency, async (client, i) =>
      (await post(`${topo.proxyUrl}/api/v1/ingest`, token, makeReport({ agentId: `bench-${client}`, hostname: `bench-${client}`, ts: base + i * 10 }))) === 200);
  } finally {
    await topo.stop();
  }
}

async function pushRun(instances: number, seconds: number, concurrency: number, batch: number, shared: boolean): Promise<Result> {
  const topo: Topology = await startTopology({ service: 'sync', instances, args: ['--scrypt-log2n', '10', '--user-rate-limit', '100000000', '--ip-rate-limit', '100000000'] });
  try {
    const reg = await fetch(`${topo.proxyUrl}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: `bench-${randomUUID()}@example.com`, name: 'Bench', password: `pw-${randomUUID()}` }) });
    const { token } = await reg.json() as { token: string };
    const newBusiness = async () => {
      const biz = await fetch(`${topo.proxyUrl}/api/business`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Bench', abn: validAbn() }) });
      return ((await biz.json()) as { id: string }).id;
    };
    // Shared: every client is a device of one business (one version counter, the contended case); otherwise one business each.
    const first = await newBusiness();
    const businesses = shared ? Array(concurrency).fill(first) as string[] : [first, ...(await Promise.all(Array.from({ length: concurrency - 1 }, newBusiness)))];
    return await load(seconds, concurrency, async (client) => {
      const businessId = businesses[client]!;
      const changes = Array.from({ length: batch }, () => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { n: client } }));
      return (await post(`${topo.proxyUrl}/api/sync/push`, token, { business_id: businessId, instance_id: `bench-${client}`, branch: 'main', changes, tombstones: [] }, { 'x-business-id': businessId })) === 200;
    });
  } finally {
    await topo.stop();
  }
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: { seconds: { type: 'string', default: '10' }, concurrency: { type: 'string', default: '32' }, batch: { type: 'string', default: '10' } } });
  if (!TOPOLOGY_READY) throw new Error('the scale benchmark needs PostgreSQL, Redis and haproxy');
  const seconds = Number(values.seconds);
  const concurrency = Number(values.concurrency);
  const batch = Number(values.batch);
  const rows: string[] = [];
  const row = (what: string, n: number, r: Result, unit: number, unitName: string) => {
    rows.push(`| ${what} | ${n} | ${(r.ok / r.seconds).toFixed(0)} | ${((r.ok * unit) / r.seconds).toFixed(0)} ${unitName} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.failed} |`);
    return r.ok / r.seconds;
  };
  const ingest1 = row('ingest', 1, await ingestRun(1, seconds, concurrency), 1, 'reports/s');
  const ingest2 = row('ingest', 2, await ingestRun(2, seconds, concurrency), 1, 'reports/s');
  const push1 = row(`push, ${batch} changes, one business`, 1, await pushRun(1, seconds, concurrency, batch, true), batch, 'changes/s');
  const push2 = row(`push, ${batch} changes, one business`, 2, await pushRun(2, seconds, concurrency, batch, true), batch, 'changes/s');
  const spread1 = row(`push, ${batch} changes, a business per client`, 1, await pushRun(1, seconds, concurrency, batch, false), batch, 'changes/s');
  const spread2 = row(`push, ${batch} changes, a business per client`, 2, await pushRun(2, seconds, concurrency, batch, false), batch, 'changes/s');
  return [
    `Through HAProxy (deploy/haproxy.cfg) on loopback, PostgreSQL and Redis on the same machine; ${concurrency} concurrent keep-alive clients for ${seconds} s per row.`,
    `"One business": every client pushes to the same business (one version counter, the contended case). Command: \`npm run bench -- scale --seconds ${seconds} --concurrency ${concurrency} --batch ${batch}\`.`,
    '',
    '| Workload | Instances | Requests/s | Throughput | p50 ms | p99 ms | Failed |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    `Two instances against one: ingest ×${(ingest2 / ingest1).toFixed(2)}, push to one business ×${(push2 / push1).toFixed(2)}, push spread over businesses ×${(spread2 / spread1).toFixed(2)}.`,
  ].join('\n');
}
