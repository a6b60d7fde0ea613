// The metrics service beside VictoriaMetrics, InfluxDB and a bare-Fastify ceiling on the same generated fleet,
// through the shared peer harness (../shared/bench-peers/run.sh), and the issue's targets as ratios of one run.
//
//   npm run build && npm run bench -- peers [--small] [--jitter 200] [--influx] [--write]
//
// Needs: apt-get install -y victoria-metrics influxdb sqlite3 (and psql); PostgreSQL at 127.0.0.1:5432 with a
// database `perf` (created if missing). Two runs: five tenants (ingest, disk, host and tenant queries) and one
// tenant (where the tenant aggregate is the fleet's, which the service answers in one request).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const harness = path.resolve(root, '../shared/bench-peers');

interface PeerResult {
  label: string;
  ingest: { reports_per_s: number; samples_per_s: number };
  disk_settled?: { bytes_per_sample_allocated: number };
  disk_compacted?: { bytes_per_sample_allocated: number };
  queries?: Record<string, { p50_ms: number } | undefined>;
  rss: { peak_mib?: number; hwm_final?: number };
}

function harnessRun(env: Record<string, string>, peers: string): { file: string; peers: PeerResult[] } {
  const work = path.join(os.tmpdir(), `fleetsync-peers-${process.pid}-${Date.now()}`);
  const r = spawnSync('bash', [path.join(harness, 'run.sh')], {
    cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8',
    env: { ...process.env, FLEETSYNC_DIR: root, WORK: work, PEERS: peers, ...env },
  });
  process.stderr.write(r.stdout);
  if (r.status !== 0) throw new Error(`run.sh exited ${r.status}`);
  const found = readdirSync(work).filter((f) => /^results-.*\.json$/.test(f)).sort().pop();
  if (!found) throw new Error(`run.sh wrote no results file in ${work}`);
  const file = path.join(work, found);
  const json = JSON.parse(readFileSync(file, 'utf8')) as { peers: Record<string, PeerResult> };
  return { file, peers: Object.values(json.peers) };
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: { small: { type: 'boolean', default: false }, jitter: { type: 'string', default: '0' }, influx: { type: 'boolean', default: false } } });
  if (!existsSync(path.join(root, 'dist/metrics/cli.js'))) throw new Error('run `npm run build` first: the harness starts dist/metrics/cli.js');
  try { execFileSync('createdb', ['-h', '127.0.0.1', '-U', 'postgres', 'perf'], { stdio: 'ignore' }); } catch { /* exists */ }
  const size = values.small ? { HOSTS: '20', REPORTS: '2000' } : { HOSTS: '100', REPORTS: '8640' };
  const env = { ...size, JITTER_MS: values.jitter!, FS_FLEET: 'skip' };
  const peersA = ['victoriametrics', ...(values.influx ? ['influxdb'] : []), 'fastify-ceiling:CONCURRENCY=64', 'fleetsync:CONCURRENCY=64', 'fleetsync:DB=pg:CONCURRENCY=64'].join(' ');
  const a = harnessRun(env, peersA);
  const b = harnessRun({ ...env, TENANTS: '1', FS_REBUILT: '0' }, 'victoriametrics fleetsync:CONCURRENCY=64');
  const table = execFileSync('node', [path.join(harness, 'report.mjs'), '--print', a.file], { encoding: 'utf8' });
  const by = (list: PeerResult[], label: string) => list.find((p) => p.label === label);
  const vm = by(a.peers, 'victoriametrics')!;
  const ceiling = by(a.peers, 'fastify-ceiling:CONCURRENCY=64')!;
  const fsSqlite = by(a.peers, 'fleetsync:CONCURRENCY=64')!;
  const fsPg = by(a.peers, 'fleetsync:DB=pg:CONCURRENCY=64')!;
  const vmFleet = by(b.peers, 'victoriametrics')!;
  const fsFleet = by(b.peers, 'fleetsync:CONCURRENCY=64')!;
  const q = (p: PeerResult, kind: string) => p.queries?.[kind]?.p50_ms ?? NaN;
  const rss = (p: PeerResult) => p.rss.peak_mib ?? (p.rss.hwm_final ?? 0) / 2 ** 20;
  const line = (what: string, value: number, target: string, met: boolean) => `| ${what} | ${value.toFixed(3)} | ${target} | ${met ? 'met' : 'NOT met'} |`;
  const ingestSqlite = fsSqlite.ingest.reports_per_s / ceiling.ingest.reports_per_s;
  const ingestPg = fsPg.ingest.reports_per_s / ceiling.ingest.reports_per_s;
  const disk = fsSqlite.disk_compacted?.bytes_per_sample_allocated ?? NaN;
  const diskSettled = fsSqlite.disk_settled?.bytes_per_sample_allocated ?? NaN;
  const host = q(fsSqlite, 'host') / q(vm, 'host');
  const tenant = q(fsSqlite, 'tenant') / q(vm, 'tenant');
  // With one tenant the harness times our tenant aggregate as the fleet query.
  const fleet = q(fsFleet, 'fleet') / q(vmFleet, 'fleet');
  const peak = Math.max(rss(fsSqlite), rss(fsFleet));
  const jitter = Number(values.jitter);
  const diskTarget = jitter ? 2 : 1;
  return [
    `Command: \`npm run build && npm run bench -- peers${values.small ? ' --small' : ''}${jitter ? ` --jitter ${jitter}` : ''}\` (${size.HOSTS} hosts x ${size.REPORTS} reports, seed 42, JITTER_MS=${jitter}).`,
    '',
    '| target (fleetsync on SQLite unless named) | ratio or value | target | |',
    '| --- | ---: | ---: | --- |',
    line('per-report ingest / Fastify ceiling, SQLite', ingestSqlite, '>= 0.6', ingestSqlite >= 0.6),
    line('per-report ingest / Fastify ceiling, PostgreSQL', ingestPg, '>= 0.4', ingestPg >= 0.4),
    line('disk bytes/sample, compacted', disk, `<= ${diskTarget}`, disk <= diskTarget),
    line('disk bytes/sample, settled (right after ingest)', diskSettled, `<= ${diskTarget}`, diskSettled <= diskTarget),
    line('host query p50 / VictoriaMetrics', host, '<= 1', host <= 1),
    line('tenant average p50 / VictoriaMetrics', tenant, '<= 0.5', tenant <= 0.5),
    line('fleet average p50 (one tenant of every host) / VictoriaMetrics', fleet, '<= 0.333', fleet <= 1 / 3),
    line('peak RSS MiB', peak, '<= 200', peak <= 200),
    '',
    'The run, as the harness prints it:',
    '',
    '```',
    table.trim(),
    '```',
    '',
    `1-minute load average at the end: ${os.loadavg()[0]!.toFixed(1)}.`,
  ].join('\n');
}
