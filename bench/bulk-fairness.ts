// Bulk fairness: how long one tenant's single reports wait while another tenant's backlog arrives in bulk bodies.
// Starts the built service (dist/: run `npm run build` first) in its own process on SQLite, as deployed:
//   npm run build && npm run bench -- bulk-fairness [--seconds 15] [--bulk-reports 5000] [--bulk-in-flight 2] [--dist DIR]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { fmt, quantile } from './lib/numbers.js';

const here = path.dirname(fileURLToPath(import.meta.url));

export async function run(argv: string[]): Promise<string> {
  const { values } = parseArgs({
    args: argv,
    options: {
      seconds: { type: 'string', default: '15' },
      'bulk-reports': { type: 'string', default: '5000' },
      'bulk-in-flight': { type: 'string', default: '2' },
      dist: { type: 'string', default: path.resolve(here, '..', 'dist') },
    },
  });
  const seconds = Number(values.seconds);
  const bulkReports = Number(values['bulk-reports']);
  const inFlight = Number(values['bulk-in-flight']);
  const cli = path.join(values.dist, 'metrics', 'cli.js');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bulk-fairness-'));
  const token = (tenant: string) => /token:\s+(\S+)/.exec(execFileSync(process.execPath, [cli, 'token', 'create', tenant, '--data-dir', dir]).toString())![1]!;
  const backlog = token('backlog');
  const live = token('live');
  const port = 20_000 + Math.floor(Math.random() * 10_000);
  const service = spawn(process.execPath, [cli, 'serve', '--port', String(port), '--data-dir', dir, '--log-level', 'warn'], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  try {
    // A service that exits (a port in use) or never gets ready fails the run instead of leaving it waiting.
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (service.exitCode !== null) throw new Error(`the service exited with ${service.exitCode} before it was ready`);
      if (Date.now() > deadline) throw new Error('the service was not ready within 30 s');
      try { if ((await fetch(`${url}/readyz`)).ok) break; } catch { /* not listening yet */ }
      await new Promise((r) => setTimeout(r, 100));
    }
    const now = Date.now();
    const report = (agentId: string, ts: number) => ({
      agentId, hostname: agentId, platform: 'linux', ts,
      cpu: { usage: 12.5, perCore: [1, 2, 3, 4, 5, 6, 7, 8], loadAverage: [0.1, 0.2, 0.3] },
      memory: { total: 8e9, used: 4e9, free: 4e9, percent: 50 },
      disks: [{ path: '/', total: 1e11, used: 5e10, available: 5e10, percent: 50 }],
      network: { rxBytes: 1e6, txBytes: 5e5, rxPackets: 1000, txPackets: 800 },
    });
    // A backlog of 50 hosts, three days old, one report a second: bodies made before the clock starts.
    let seq = 0;
    const bodies = Array.from({ length: 4 }, () => Array.from({ length: bulkReports }, () => JSON.stringify(report(`backlog-${seq % 50}`, now - 3 * 86_400_000 + (seq++) * 1000))).join('\n'));
    let stop = false;
    let bulkBodies = 0;
    const bulk = async (k: number) => {
      while (!stop) {
        const r = await fetch(`${url}/api/v1/ingest/bulk`, { method: 'POST', headers: { authorization: `Bearer ${backlog}`, 'content-type': 'application/x-ndjson' }, body: bodies[(bulkBodies + k) % bodies.length]! });
        await r.text();
        if (r.status !== 200) throw new Error(`bulk body answered ${r.status}`);
        bulkBodies++;
      }
    };
    const latencies: number[] = [];
    const single = async () => {
      for (let i = 0; !stop; i++) {
        const t = performance.now();
        const r = await fetch(`${url}/api/v1/ingest`, { method: 'POST', headers: { authorization: `Bearer ${live}`, 'content-type': 'application/json' }, body: JSON.stringify(report('live-1', now - 600_000 + i * 10)) });
        await r.text();
        if (r.status !== 200) throw new Error(`single report answered ${r.status}`);
        latencies.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const load = os.loadavg()[0]!;
    const running = [...Array.from({ length: inFlight }, (_, k) => bulk(k)), single()];
    await new Promise((r) => setTimeout(r, seconds * 1000));
    stop = true;
    await Promise.all(running);
    latencies.sort((a, b) => a - b);
    const ms = (q: number) => quantile(latencies, q).toFixed(1);
    return [
      `Command: \`npm run build && npm run bench -- bulk-fairness --seconds ${seconds} --bulk-reports ${bulkReports} --bulk-in-flight ${inFlight}\``,
      '',
      `For ${seconds} s, one tenant sends its backlog as bulk bodies of ${fmt(bulkReports)} reports, ${inFlight} in flight, while another tenant`,
      'sends single reports one after the other, 10 ms apart; the built service runs in its own process on SQLite with its defaults.',
      '',
      '| single reports answered | latency p50 / p95 / p99 / max (ms) | bulk bodies answered | bulk reports/s | 1-minute load at the start |',
      '| ---: | ---: | ---: | ---: | ---: |',
      `| ${fmt(latencies.length)} | ${ms(0.5)} / ${ms(0.95)} / ${ms(0.99)} / ${latencies.at(-1)!.toFixed(1)} | ${fmt(bulkBodies)} | ${fmt((bulkBodies * bulkReports) / seconds)} | ${load.toFixed(1)} |`,
    ].join('\n');
  } finally {
    if (service.exitCode === null) {
      service.kill('SIGTERM');
      await new Promise((r) => service.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
