// N metrics instances on one PostgreSQL, no proxy: clients spread one-report requests round-robin over them.
// Besides throughput it records the PostgreSQL side, which is what decides scale-out when the instances do not
// fight over rows: backends waiting on locks (sampled), deadlocks, and database CPU per 1,000 reports.
//
//   npm run build && npm run bench -- metrics-scale [--instances 1,2,4] [--seconds 20] [--clients 64] [--dir <built checkout>]
//
// --dir runs another build (for example the layout before the storage engine) with the same load, for a before/after.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { onFreshSchema, pgCpu } from './lib/postgres.js';
import { stopAll, waitUp } from './lib/instances.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const GEN = path.resolve(root, '../shared/bench-peers/gen.mjs');
const PG_URL = process.env['BENCH_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/perf';

interface Gen {
  defaults(o: Record<string, unknown>): Record<string, unknown>;
  generate(o: Record<string, unknown>): Iterable<Array<{ h: { tenant: string } }>>;
  toReport(s: unknown): Record<string, unknown>;
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: {
    instances: { type: 'string', default: '1,2,4' }, seconds: { type: 'string', default: '20' },
    clients: { type: 'string', default: '64' }, dir: { type: 'string', default: root },
  } });
  const dir = path.resolve(values.dir!);
  const cli = path.join(dir, 'dist/metrics/cli.js');
  try { execFileSync('createdb', ['-h', '127.0.0.1', '-U', 'postgres', 'perf'], { stdio: 'ignore' }); } catch { /* exists */ }
  const gen = (await import(pathToFileURL(GEN).href)) as Gen;
  const fleet = [...gen.generate(gen.defaults({ hosts: 200, reports: 1500, batch: 1_000_000 }))].flat()
    .map((s) => ({ tenant: s.h.tenant, body: JSON.stringify(gen.toReport(s)) }));
  const rows: string[] = [];
  let base = 0;
  for (const n of values.instances!.split(',').map(Number)) {
    const r = await runOnce(cli, n, fleet, Number(values.seconds), Number(values.clients));
    base ||= r.reportsPerS;
    rows.push(`| ${n} | ${Math.round(r.reportsPerS).toLocaleString('en-US')} | ${(r.reportsPerS / base).toFixed(2)} | ${r.pgCpuPerK.toFixed(3)} | ${r.lockWaiting.toFixed(2)} | ${r.deadlocks} |`);
  }
  return [
    `Command: \`npm run bench -- metrics-scale --instances ${values.instances} --seconds ${values.seconds} --clients ${values.clients}${values.dir === root ? '' : ' --dir <other build>'}\``,
    `(build: ${path.relative(root, dir) || 'this checkout'}, commit ${execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()}).`,
    '',
    `One-report POSTs from ${values.clients} clients, round-robin over the instances, ${values.seconds} s per row, 200 hosts of the peers' generator in 5 tenants;`,
    'PostgreSQL CPU is that of the backends of this database (from /proc); lock waiters are backends of this database in a Lock wait, sampled every 100 ms.',
    '',
    '| instances | reports/s | vs one | PostgreSQL CPU s per 1,000 reports | backends waiting on locks (mean) | deadlocks |',
    '| ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}

async function runOnce(cli: string, n: number, fleet: Array<{ tenant: string; body: string }>, seconds: number, clients: number) {
  const schema = `scale_${process.pid}_${n}`;
  return onFreshSchema(PG_URL, schema, async (admin, env) => {
    const procs: ChildProcess[] = [];
    try {
      const tokens = new Map<string, string>();
      for (const t of new Set(fleet.map((f) => f.tenant))) {
        const out = execFileSync('node', [cli, 'token', 'create', t, '--db-schema', schema], { env, encoding: 'utf8' });
        tokens.set(t, /token: +(\S+)/.exec(out)![1]!);
      }
      const urls: string[] = [];
      for (let i = 0; i < n; i++) {
        const port = 22100 + i;
        procs.push(spawn('node', [cli, 'serve', '--port', String(port), '--db-schema', schema, '--retention-days', '36500', '--log-level', 'warn'], { env, stdio: 'ignore' }));
        urls.push(`http://127.0.0.1:${port}`);
      }
      for (const u of urls) await waitUp(u);
      const db = new URL(PG_URL).pathname.slice(1);
      const cpu0 = pgCpu(db);
      const deadlocks0 = Number((await admin.query('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()')).rows[0].deadlocks);
      let waiting = 0;
      let samples = 0;
      const sampler = setInterval(() => {
        void admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
          .then((r) => { waiting += r.rows[0].n as number; samples++; });
      }, 100);
      let next = 0;
      let done = 0;
      const deadline = performance.now() + seconds * 1000;
      const started = performance.now();
      await Promise.all(Array.from({ length: clients }, async (_, c) => {
        while (performance.now() < deadline && next < fleet.length) {
          const f = fleet[next++]!;
          const res = await fetch(`${urls[(next + c) % urls.length]}/api/v1/ingest`, {
            method: 'POST', headers: { authorization: `Bearer ${tokens.get(f.tenant)}`, 'content-type': 'application/json' }, body: f.body,
          });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`ingest answered ${res.status}`);
          done++;
        }
      }));
      const elapsed = (performance.now() - started) / 1000;
      clearInterval(sampler);
      const deadlocks = Number((await admin.query('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()')).rows[0].deadlocks) - deadlocks0;
      return { reportsPerS: done / elapsed, pgCpuPerK: (pgCpu(db) - cpu0) / (done / 1000), lockWaiting: samples ? waiting / samples : 0, deadlocks };
    } finally {
      await stopAll(procs);
    }
  });
}
