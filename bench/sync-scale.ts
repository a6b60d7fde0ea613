// N sync instances on one PostgreSQL, no proxy: each client pushes new records to its own business, its requests
// going round-robin over the instances. Besides throughput it records the PostgreSQL side, which decides scale-out
// when the instances share no rows: what the database's backends wait on (pg_stat_activity and pg_locks, sampled),
// and database CPU per change; and the instances' own CPU per change.
//
//   npm run build && npm run bench -- sync-scale [--instances 1,2,4] [--seconds 15] [--clients 64] [--batch 10] [--dir <built checkout>]
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { validAbn } from '../test/helpers/sync.js';
import { ensureDatabase, onFreshSchema, pgCpu } from './lib/postgres.js';
import { stopAll, waitUp } from './lib/instances.js';
import { fmt } from './lib/numbers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PG_URL = process.env['BENCH_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/bench_sync';
const PG_DB = new URL(PG_URL).pathname.slice(1);
const ARGS = ['--scrypt-log2n', '10', '--user-rate-limit', '100000000', '--ip-rate-limit', '100000000', '--max-expensive-in-flight', '10000', '--log-level', 'warn'];

interface Run {
  changesPerS: number; p50: number; p99: number; failed: number;
  pgUs: number; nodeUs: number;
  /** Mean backends of the database per state/wait, over the samples. */
  waits: Map<string, number>;
  /** Mean ungranted locks per lock type and relation. */
  locks: Map<string, number>;
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: {
    instances: { type: 'string', default: '1,2' }, seconds: { type: 'string', default: '15' },
    clients: { type: 'string', default: '64' }, batch: { type: 'string', default: '10' }, dir: { type: 'string', default: root },
  } });
  const cli = path.join(path.resolve(values.dir!), 'dist/sync/cli.js');
  await ensureDatabase(PG_URL);
  const counts = values.instances!.split(',').map(Number);
  const runs: Run[] = [];
  for (const n of counts) runs.push(await runOnce(cli, n, Number(values.seconds), Number(values.clients), Number(values.batch)));
  const base = runs[0]!.changesPerS;
  const keys = (pick: (r: Run) => Map<string, number>) => [...new Set(runs.flatMap((r) => [...pick(r)].filter(([, v]) => v >= 0.05).map(([k]) => k)))].sort();
  const waitKeys = keys((r) => r.waits);
  const lockKeys = keys((r) => r.locks);
  return [
    `Command: \`npm run build && npm run bench -- sync-scale --instances ${values.instances} --seconds ${values.seconds} --clients ${values.clients} --batch ${values.batch}\``,
    '',
    `${values.clients} clients, each with its own user and business, push ${values.batch} new records per request for ${values.seconds} s, round-robin over the instances`,
    '(started from dist/, no proxy, all on one PostgreSQL). CPU is per applied change: the database\'s backends and the instances\' processes (/proc).',
    'Backends of the database are sampled every 100 ms from pg_stat_activity (state and wait event) and pg_locks (locks not granted).',
    '',
    '| Instances | Changes/s | vs one | Push p50 / p99 (ms) | Failed | PostgreSQL CPU (µs/change) | Instances CPU (µs/change) |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...runs.map((r, i) => `| ${counts[i]} | ${fmt(r.changesPerS)} | ${(r.changesPerS / base).toFixed(2)} | ${r.p50.toFixed(1)} / ${r.p99.toFixed(1)} | ${r.failed} | ${r.pgUs.toFixed(1)} | ${r.nodeUs.toFixed(1)} |`),
    '',
    'Backends of the database by state and wait event (mean count over the samples; "running" is active with no wait):',
    '',
    `| State: wait | ${counts.map((n) => `${n} instance${n > 1 ? 's' : ''}`).join(' | ')} |`,
    `| --- | ${counts.map(() => '---:').join(' | ')} |`,
    ...waitKeys.map((k) => `| ${k} | ${runs.map((r) => (r.waits.get(k) ?? 0).toFixed(2)).join(' | ')} |`),
    '',
    'Locks waited for (mean ungranted locks over the samples, by lock type, mode and relation):',
    '',
    `| Lock | ${counts.map((n) => `${n} instance${n > 1 ? 's' : ''}`).join(' | ')} |`,
    `| --- | ${counts.map(() => '---:').join(' | ')} |`,
    ...(lockKeys.length ? lockKeys.map((k) => `| ${k} | ${runs.map((r) => (r.locks.get(k) ?? 0).toFixed(2)).join(' | ')} |`) : [`| none | ${counts.map(() => '0').join(' | ')} |`]),
  ].join('\n');
}

async function runOnce(cli: string, n: number, seconds: number, clients: number, batch: number): Promise<Run> {
  const schema = `sscale_${process.pid}_${n}`;
  return onFreshSchema(PG_URL, schema, async (admin, env) => {
    const procs: ChildProcess[] = [];
    try {
      const urls: string[] = [];
      for (let i = 0; i < n; i++) {
        const port = 22300 + i;
        procs.push(spawn(process.execPath, [cli, 'serve', '--port', String(port), '--db-schema', schema, ...ARGS], { env, stdio: ['ignore', 'ignore', 'inherit'] }));
        urls.push(`http://127.0.0.1:${port}`);
        // The first one migrates the schema; the others start on it.
        await waitUp(urls[i]!);
      }
      // One after another: the service bounds concurrent sign-ins (password hashing) and would shed the rest.
      const accounts: { token: string; businessId: string }[] = [];
      for (let c = 0; c < clients; c++) {
        const reg = await post(urls[c % n]!, '/api/auth/register', undefined, { email: `scale-${randomUUID()}@example.com`, name: 'Scale', password: `pw-${randomUUID()}` });
        const token = reg.token as string;
        const business = await post(urls[c % n]!, '/api/business', token, { name: 'Scale', abn: validAbn() });
        accounts.push({ token, businessId: business.id as string });
      }

      const cpu0 = pgCpu(PG_DB);
      const node0 = procCpu(procs);
      const waits = new Map<string, number>();
      const locks = new Map<string, number>();
      let samples = 0;
      const sampler = setInterval(() => {
        void Promise.all([
          admin.query(`SELECT state, wait_event_type, wait_event FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`),
          admin.query(`SELECT l.locktype, l.mode, coalesce(c.relname, '') AS rel FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted`),
        ]).then(([a, l]) => {
          samples++;
          for (const r of a.rows as { state: string; wait_event_type: string | null; wait_event: string | null }[]) {
            const k = r.state === 'active' && !r.wait_event_type ? 'active: running' : `${r.state}: ${r.wait_event_type ? `${r.wait_event_type}/${r.wait_event}` : '-'}`;
            waits.set(k, (waits.get(k) ?? 0) + 1);
          }
          for (const r of l.rows as { locktype: string; mode: string; rel: string }[]) {
            const k = `${r.locktype} ${r.mode}${r.rel ? ` on ${r.rel}` : ''}`;
            locks.set(k, (locks.get(k) ?? 0) + 1);
          }
        });
      }, 100);
      const latencies: number[] = [];
      let changes = 0;
      let failed = 0;
      const started = performance.now();
      const deadline = started + seconds * 1000;
      await Promise.all(accounts.map(async ({ token, businessId }, c) => {
        for (let i = 0; performance.now() < deadline; i++) {
          const items = Array.from({ length: batch }, () => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { c, i } }));
          const t = performance.now();
          const res = await fetch(`${urls[(i + c) % n]}/api/sync/push`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'x-business-id': businessId, 'content-type': 'application/json' },
            body: JSON.stringify({ business_id: businessId, instance_id: `scale-${c}`, changes: items }),
          });
          await res.arrayBuffer();
          latencies.push(performance.now() - t);
          if (res.status === 200) changes += batch;
          else failed++;
        }
      }));
      const elapsed = (performance.now() - started) / 1000;
      clearInterval(sampler);
      const pgSeconds = pgCpu(PG_DB) - cpu0;
      const nodeSeconds = procCpu(procs) - node0;
      latencies.sort((a, b) => a - b);
      const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
      const mean = (m: Map<string, number>) => new Map([...m].map(([k, v]) => [k, v / Math.max(1, samples)]));
      return {
        changesPerS: changes / elapsed, p50: q(0.5), p99: q(0.99), failed,
        pgUs: (pgSeconds * 1e6) / changes, nodeUs: (nodeSeconds * 1e6) / changes, waits: mean(waits), locks: mean(locks),
      };
    } finally {
      await stopAll(procs);
    }
  });
}

async function post(url: string, p: string, token: string | undefined, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url + p, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
  const out = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${p}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

/** CPU seconds so far of the given processes (their threads included), from /proc. */
function procCpu(procs: ChildProcess[]): number {
  let total = 0;
  for (const p of procs) {
    try {
      const stat = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) / 100;
    } catch { /* gone */ }
  }
  return total;
}
