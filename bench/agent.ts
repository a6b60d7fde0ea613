// Host agent: footprint and backlog delivery, on the bundled agent as installed (dist/host-agent.cjs), started with
// the node flags and environment of the shipped systemd unit (deploy/host-agent.service).
//   1. Footprint: every collector on (per-core CPU modes included) at the production interval against a local
//      receiver that answers like the bulk endpoint; RSS (VmRSS, and RssAnon: the private part) and CPU time
//      from /proc/<pid>/status and /proc/<pid>/stat.
//   2. Backlog: a 7-day spool (60,480 reports at 10 s, real reports of this machine with shifted times)
//      drained by `host-agent --once` into the real metrics service (SQLite, this process), timed end to end.
//
//   npm run build && npm run bench -- agent [--minutes 10] [--interval-ms 10000] [--sample-ms 5000] [--backlog 60480]
//     [--part backlog|footprint] [--agent-cpu-prof <dir>] [--write]
// The service's side of the drain is profiled with `node --cpu-prof --import tsx bench/run.ts agent --part backlog`.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { destinationKey } from '../src/agent/delivery/destination.js';
import { buildMetricsApp } from '../src/metrics/app.js';
import { loadMetricsConfig } from '../src/metrics/config.js';
import { createMetricsDeps } from '../src/metrics/deps.js';
import { issueToken } from '../src/metrics/domain/tenant-tokens.js';
import { agentLaunch, type AgentLaunch } from './agent-unit.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

function status(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no ${field} for ${pid}`);
  return Number(m[1]) * 1024;
}

/** utime + stime in clock ticks (fields 14 and 15 of /proc/<pid>/stat, counted after the parenthesised name). */
function cpuTicks(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

const mib = (b: number) => (b / 2 ** 20).toFixed(1);
const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

function exited(child: ReturnType<typeof spawn>): Promise<number | null> {
  return new Promise((r) => child.once('exit', (code) => r(code)));
}

/** Starts the bundle the way the unit does: its node flags first, its environment added. */
function startAgent(launch: AgentLaunch, bundle: string, args: string[], stdio: Parameters<typeof spawn>[2]['stdio'], nodeFlags: string[] = []) {
  return spawn(process.execPath, [...launch.nodeFlags, ...nodeFlags, bundle, ...args], { stdio, env: { ...process.env, ...launch.env } });
}

const DAY_MS = 86_400_000;

async function footprint(launch: AgentLaunch, bundle: string, minutes: number, intervalMs: number, sampleMs: number): Promise<string[]> {
  const clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  let received = 0;
  let metrics = 0;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const lines = gunzipSync(Buffer.concat(chunks)).toString('utf8').split('\n').filter(Boolean);
      received += lines.length;
      metrics = Math.max(metrics, JSON.stringify(JSON.parse(lines.at(-1)!)).match(/:-?\d/g)?.length ?? 0);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: lines.map((_, i) => ({ line: i + 1, status: 'stored' })) }));
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const spoolDir = mkdtempSync(path.join(os.tmpdir(), 'agent-bench-'));
  const agent = startAgent(launch, bundle, ['--url', url, '--token', 'bench-token', '--secret', 'bench-secret', '--per-core-cpu-modes',
    '--interval-ms', String(intervalMs), '--spool-dir', spoolDir, '--log-level', 'warn'], ['ignore', 'inherit', 'inherit']);
  const pid = agent.pid!;
  const started = performance.now();
  const samples: { t: number; rss: number; anon: number; file: number; ticks: number }[] = [];
  const durationMs = minutes * 60_000;
  while (performance.now() - started < durationMs) {
    await new Promise((r) => setTimeout(r, sampleMs));
    if (agent.exitCode !== null) throw new Error(`agent exited early with ${agent.exitCode}`);
    samples.push({ t: performance.now() - started, rss: status(pid, 'VmRSS'), anon: status(pid, 'RssAnon'), file: status(pid, 'RssFile'), ticks: cpuTicks(pid) });
  }
  agent.kill('SIGTERM');
  await exited(agent);
  receiver.close();
  rmSync(spoolDir, { recursive: true, force: true });
  const last = samples.at(-1)!;
  // Steady state leaves out the first minute: module loading and JIT warm-up are paid once per start.
  const warm = samples.find((s) => s.t >= 60_000) ?? samples[0]!;
  const steady = samples.filter((s) => s.t >= warm.t);
  const cpuPct = (ticks: number, ms: number) => ((ticks / clkTck) / (ms / 1000)) * 100;
  // The floor: the same binary, flags and environment running a script that does nothing (CommonJS, like the bundle).
  const bareScript = 'setTimeout(()=>console.log(/VmRSS:\\s+(\\d+)/.exec(require("fs").readFileSync("/proc/self/status","utf8"))[1]*1024),1000)';
  const bare = Number(execFileSync(process.execPath, [...launch.nodeFlags, '-e', bareScript], { encoding: 'utf8', env: { ...process.env, ...launch.env }, stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  return [
    `**Footprint.** \`node ${launch.nodeFlags.join(' ')} dist/host-agent.cjs\` with \`${Object.entries(launch.env).map(([k, v]) => `${k}=${v}`).join(' ')}\` (the bundled agent`,
    `as the systemd unit starts it) with every collector on, per-core CPU modes included (about ${metrics} numbers per report on this machine),`,
    `signing every report, at a ${intervalMs / 1000} s interval for ${minutes} min, against a local receiver answering like the bulk endpoint; sampled`,
    `every ${sampleMs / 1000} s from /proc/<pid>/status and /proc/<pid>/stat.`,
    '',
    '| Measure | Value | Target |',
    '| --- | --- | --- |',
    `| RSS (VmRSS), max | ${mib(Math.max(...samples.map((s) => s.rss)))} MiB | <= 40 MiB |`,
    `| RSS (VmRSS), average after the first minute | ${mib(avg(steady.map((s) => s.rss)))} MiB | |`,
    `| of which private memory (RssAnon), average after the first minute | ${mib(avg(steady.map((s) => s.anon)))} MiB | |`,
    `| of which mapped files (RssFile: the node binary and its libraries, shared), average after the first minute | ${mib(avg(steady.map((s) => s.file)))} MiB | |`,
    `| For scale: \`node -e\` of the same binary, flags and environment, doing nothing | ${mib(bare)} MiB | |`,
    `| CPU, whole run incl. start | ${cpuPct(last.ticks, last.t).toFixed(3)} % of one core | |`,
    `| CPU, after the first minute | ${cpuPct(last.ticks - warm.ticks, last.t - warm.t).toFixed(3)} % of one core | <= 0.1 % |`,
    `| Reports received | ${received} | ${Math.floor(durationMs / intervalMs)} expected |`,
  ];
}

async function backlog(launch: AgentLaunch, bundle: string, count: number, cpuProfDir: string | undefined): Promise<string[]> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agent-backlog-'));
  const config = { ...loadMetricsConfig(['--data-dir', dataDir, '--port', '0', '--log-level', 'warn'], {}) };
  const deps = await createMetricsDeps(config);
  const app = await buildMetricsApp(config, deps, { logStream: new Writable({ write: (_c, _e, cb) => cb() }) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const { token, tenantId } = await issueToken(deps.store, 'bench');
  const stateDir = path.join(dataDir, 'agent');
  const machineId = path.join(dataDir, 'machine-id');
  writeFileSync(machineId, 'b1e55ed0b1e55ed0b1e55ed0b1e55ed0\n');
  // One real report of this machine (every collector on), spooled `count` times 10 s apart over the past week.
  const sampleDir = path.join(dataDir, 'sample');
  const sample = startAgent(launch, bundle, ['--once', '--url', 'http://127.0.0.1:9', '--token', 'x', '--per-core-cpu-modes', '--spool-dir', sampleDir, '--machine-id-file', machineId, '--log-level', 'silent', '--request-timeout-ms', '200'], 'ignore');
  await exited(sample);
  const spooled = path.join(sampleDir, `spool-${destinationKey('http://127.0.0.1:9', 'x')}`);
  const sampleFile = readdirSync(spooled).find((n) => n.startsWith('r-'))!;
  const report = JSON.parse(readFileSync(path.join(spooled, sampleFile), 'utf8')) as { ts: number };
  const spool = path.join(stateDir, `spool-${destinationKey(url, token)}`);
  mkdirSync(spool, { recursive: true });
  // The week up to now. Writing 60,000 files can take minutes on a busy machine, so the agent is given an 8-day age
  // bound: the oldest report must not be dropped as stale before the drain begins.
  const newest = Date.now();
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const ts = newest - (count - 1 - i) * 10_000;
    const body = JSON.stringify({ ...report, ts });
    bytes += body.length;
    writeFileSync(path.join(spool, `r-${String(i + 1).padStart(16, '0')}-${ts}.json`), body);
  }
  const started = performance.now();
  const serviceCpu = process.cpuUsage();
  const agent = startAgent(launch, bundle, ['--once', '--url', url, '--token', token, '--per-core-cpu-modes', '--spool-dir', stateDir, '--machine-id-file', machineId,
    '--spool-max-age-ms', String(8 * DAY_MS), '--log-level', 'warn'], ['ignore', 'pipe', 'inherit'], cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', cpuProfDir] : []);
  let out = '';
  agent.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  // The agent's CPU time, read until it exits (the last quarter second is missed).
  let agentTicks = 0;
  const ticker = setInterval(() => { try { agentTicks = cpuTicks(agent.pid!); } catch { /* exited */ } }, 250);
  const code = await exited(agent);
  clearInterval(ticker);
  const seconds = (performance.now() - started) / 1000;
  const service = process.cpuUsage(serviceCpu);
  const clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  let stored = 0;
  for (const hostId of await deps.store.listHosts(tenantId)) {
    const series = await deps.store.readHostSeries(tenantId, hostId, { from: 0, to: Date.now() + 60_000, points: 10_000_000, minmax: false });
    stored += series?.timestamps.length ?? 0;
  }
  await app.close();
  await deps.close();
  rmSync(dataDir, { recursive: true, force: true });
  if (code !== 0) throw new Error(`host-agent --once exited ${code}: ${out}`);
  if (stored !== count + 1) throw new Error(`${stored} reports stored, ${count + 1} expected`);
  return [
    `**Backlog.** A 7-day spool: ${count} reports (${mib(bytes)} MiB of JSON, one real report of this machine with every collector on,`,
    `10 s apart) drained by \`host-agent --once\` (started as the unit starts it) into the metrics service (SQLite, in the benchmark's process)`,
    `through POST /api/v1/ingest/bulk, gzip batches of 1,000, one request in flight while the next batch is read and compressed.`,
    `Agent start to exit: **${seconds.toFixed(1)} s** (target <= 30 s), and ${stored} reports stored (the backlog and the one \`--once\` collects);`,
    `${Math.round(count / seconds)} reports/s. CPU meanwhile: the agent ~${(agentTicks / clkTck).toFixed(1)} s, the benchmark's process (the service, its storage`,
    `worker, and this harness) ${((service.user + service.system) / 1e6).toFixed(1)} s. The agent's line: \`${out.trim()}\`.`,
  ];
}

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: {
    minutes: { type: 'string', default: '10' }, 'interval-ms': { type: 'string', default: '10000' }, 'sample-ms': { type: 'string', default: '5000' },
    backlog: { type: 'string', default: '60480' }, part: { type: 'string' }, 'agent-cpu-prof': { type: 'string' },
  } });
  const bundle = path.join(root, 'dist', 'host-agent.cjs');
  if (!existsSync(bundle)) throw new Error('dist/host-agent.cjs is missing: run `npm run build` first (the benchmark measures the installed file)');
  if (values.part !== undefined && values.part !== 'backlog' && values.part !== 'footprint') throw new Error('--part is backlog or footprint');
  const launch = agentLaunch();
  const lines = [
    ...(values.part === 'footprint' ? [] : [...(await backlog(launch, bundle, Number(values.backlog), values['agent-cpu-prof'])), '']),
    ...(values.part === 'backlog' ? [] : [...(await footprint(launch, bundle, Number(values.minutes), Number(values['interval-ms']), Number(values['sample-ms']))), '']),
    'The machine was shared with other engineers\' test runs (2 cores): CPU and timing figures are upper bounds.',
    `Command: \`npm run build && npm run bench -- agent --write\` (options: \`--minutes\`, \`--interval-ms\`, \`--sample-ms\`, \`--backlog\`, \`--part\`).`,
  ];
  return lines.join('\n');
}
