// Host agent footprint: runs the compiled agent (`node dist/agent/cli.js`, as
// deployed) at its production interval against a local receiver and samples
// its resident memory and CPU time from /proc/<pid>/status and /proc/<pid>/stat.
//
//   npm run build && npm run bench -- agent [--minutes 10] [--interval-ms 10000] [--sample-ms 5000] [--write]
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** utime + stime in clock ticks (fields 14 and 15 of /proc/<pid>/stat, counted after the parenthesised name). */
function cpuTicks(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

const mib = (b: number) => (b / 2 ** 20).toFixed(1);

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({ args: argv, options: {
    minutes: { type: 'string', default: '10' }, 'interval-ms': { type: 'string', default: '10000' }, 'sample-ms': { type: 'string', default: '5000' },
  } });
  const minutes = Number(values.minutes);
  const intervalMs = Number(values['interval-ms']);
  const sampleMs = Number(values['sample-ms']);
  const cli = path.join(root, 'dist', 'agent', 'cli.js');
  if (!existsSync(cli)) throw new Error('dist/agent/cli.js is missing: run `npm run build` first (the benchmark measures the compiled agent)');
  const clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

  let received = 0;
  let signed = 0;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
      received++;
      if (req.headers['x-collector-signature']) signed++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"stored":true}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const spoolDir = mkdtempSync(path.join(os.tmpdir(), 'agent-bench-'));
  const agent = spawn(process.execPath, [cli, '--url', url, '--token', 'bench-token', '--secret', 'bench-secret',
    '--interval-ms', String(intervalMs), '--spool-dir', spoolDir, '--log-level', 'warn'], { stdio: ['ignore', 'inherit', 'inherit'] });
  const pid = agent.pid!;
  const started = performance.now();
  const samples: { t: number; rss: number; ticks: number }[] = [];
  const durationMs = minutes * 60_000;
  while (performance.now() - started < durationMs) {
    await new Promise((r) => setTimeout(r, sampleMs));
    if (agent.exitCode !== null) throw new Error(`agent exited early with ${agent.exitCode}`);
    samples.push({ t: performance.now() - started, rss: rssBytes(pid), ticks: cpuTicks(pid) });
  }
  agent.kill('SIGTERM');
  await new Promise((r) => agent.once('exit', r));
  receiver.close();
  rmSync(spoolDir, { recursive: true, force: true });

  const last = samples.at(-1)!;
  // Steady state leaves out the first minute: module loading and JIT warm-up are paid once per start.
  const warm = samples.find((s) => s.t >= 60_000) ?? samples[0]!;
  const cpuPct = (ticks: number, ms: number) => ((ticks / clkTck) / (ms / 1000)) * 100;
  const rss = samples.map((s) => s.rss);
  const steadyRss = samples.filter((s) => s.t >= warm.t).map((s) => s.rss);
  return [
    `Compiled agent (\`node dist/agent/cli.js\`, as deployed by the systemd unit) at a ${intervalMs / 1000} s interval for ${minutes} min,`,
    `signing every report, against a local HTTP receiver; RSS from /proc/<pid>/status (VmRSS), CPU time (utime+stime) from /proc/<pid>/stat, sampled every ${sampleMs / 1000} s.`,
    '',
    '| Measure | Value | Aim |',
    '| --- | --- | --- |',
    `| RSS, max | ${mib(Math.max(...rss))} MiB | < 60 MB |`,
    `| RSS, average | ${mib(rss.reduce((a, b) => a + b, 0) / rss.length)} MiB | |`,
    `| RSS, average after the first minute | ${mib(steadyRss.reduce((a, b) => a + b, 0) / steadyRss.length)} MiB | |`,
    `| CPU, whole run incl. start | ${cpuPct(last.ticks, last.t).toFixed(3)} % of one core | < 0.5 % |`,
    `| CPU, after the first minute | ${cpuPct(last.ticks - warm.ticks, last.t - warm.t).toFixed(3)} % of one core | < 0.5 % |`,
    `| Reports received (signed) | ${received} (${signed}) | ${Math.floor(durationMs / intervalMs)} expected |`,
    '',
    `Command: \`npm run build && npm run bench -- agent --write\` (options: \`--minutes\`, \`--interval-ms\`, \`--sample-ms\`).`,
  ].join('\n');
}
