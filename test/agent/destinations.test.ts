import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { appSpecificMachineId } from '../../src/agent/agent-id.js';
import { destinationSpoolDir } from '../../src/agent/delivery/destination.js';
import { runOnce, startAgent } from '../../src/agent/start-agent.js';
import { call } from '../helpers/http.js';
import { makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { captureLog, tempDir, waitFor } from './agent-harness.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { nodeEntry } from '../helpers/node-entry.js';

const MACHINE_ID = '0123456789abcdef0123456789abcdef';
const FAST = { intervalMs: 200, retryBaseMs: 20, retryMaxMs: 200, requestTimeoutMs: 5_000, shutdownTimeoutMs: 2_000 };

const dirs: string[] = [];
const services: MetricsHarness[] = [];
after(async () => {
  for (const s of services) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function dir(): string { const d = tempDir(); dirs.push(d); return d; }
async function service(): Promise<MetricsHarness> { const s = await startMetrics('sqlite'); services.push(s); return s; }

/** A state directory and a machine-id file, as a host would have. */
function machine(): { stateDir: string; machineIdFile: string } {
  const d = dir();
  const machineIdFile = path.join(d, 'machine-id');
  writeFileSync(machineIdFile, `${MACHINE_ID}\n`);
  return { stateDir: path.join(d, 'state'), machineIdFile };
}

function hosts(m: MetricsHarness, token: string) {
  return call(m.url, 'GET', '/api/v1/hosts', { token }).then((r) => r.body as string[]);
}

test('two destinations sharing a machine and a state directory: each report reaches only the service and token it was made for, under the machine\'s one id', async () => {
  const { stateDir, machineIdFile } = machine();
  const a = await service();
  const b = await service();
  const ta = await a.newTenant();
  const tb = await b.newTenant();
  const tb2 = await b.newTenant();
  // A failed --once to an unreachable service leaves its report spooled for that destination only.
  const failed = await runOnce({ url: 'http://127.0.0.1:9', token: 'x', spoolDir: stateDir, machineIdFile, log: captureLog().log, ...FAST }, 50);
  assert.equal(failed.spooled, 1);
  const agents = await Promise.all([
    startAgent({ ...FAST, url: a.url, token: ta.token, spoolDir: stateDir, machineIdFile, log: captureLog().log }),
    startAgent({ ...FAST, url: b.url, token: tb.token, spoolDir: stateDir, machineIdFile, log: captureLog().log }),
    startAgent({ ...FAST, url: b.url, token: tb2.token, spoolDir: stateDir, machineIdFile, log: captureLog().log }),
  ]);
  try {
    await waitFor('each destination has reports', async () => (await hosts(a, ta.token)).length > 0 && (await hosts(b, tb.token)).length > 0 && (await hosts(b, tb2.token)).length > 0);
  } finally {
    for (const g of agents) await g.stop();
  }
  const id = appSpecificMachineId(MACHINE_ID)!;
  assert.deepEqual(agents.map((g) => g.agentId), [id, id, id], 'the agent id belongs to the machine');
  assert.deepEqual(await hosts(a, ta.token), [id]);
  assert.deepEqual(await hosts(b, tb.token), [id]);
  assert.deepEqual(await hosts(b, tb2.token), [id]);
  const spools = readdirSync(stateDir).filter((n) => n.startsWith('spool-'));
  assert.equal(spools.length, 4, 'one spool per URL and token');
  const unreachable = spools.find((s) => JSON.parse(readFileSync(path.join(stateDir, s, 'destination.json'), 'utf8')).url === 'http://127.0.0.1:9');
  assert.ok(unreachable);
  assert.equal(readdirSync(path.join(stateDir, unreachable)).filter((n) => n.startsWith('r-')).length, 1, 'the report made for the unreachable service was never sent elsewhere');
  assert.ok(!readFileSync(path.join(stateDir, unreachable, 'destination.json'), 'utf8').includes('"x"'), 'the token is not written down');
});

test('another destination\'s spool keeps every report whatever this agent\'s --spool-max-age-ms (its own agent may be down for longer), and each start says what it holds', async () => {
  const { stateDir, machineIdFile } = machine();
  const m = await service();
  const t = await m.newTenant();
  // Agent A's backlog: three reports from two days ago, spooled while its service was down, inside A's 7-day bound.
  const aSpool = await destinationSpoolDir(stateDir, m.url, t.token);
  const twoDaysAgo = Date.now() - 2 * 86_400_000;
  const backlog = [1, 2, 3].map((seq) => {
    const name = `r-${String(seq).padStart(16, '0')}-${twoDaysAgo + seq * 10_000}.json`;
    writeFileSync(path.join(aSpool, name), JSON.stringify(makeReport({ agentId: 'web-a', ts: twoDaysAgo + seq * 10_000 })));
    return name;
  });
  const bytes = backlog.reduce((n, name) => n + statSync(path.join(aSpool, name)).size, 0);
  // Agent B, sending elsewhere with a one-day bound, starts on the same state directory.
  const cap = captureLog();
  const started = Date.now();
  await runOnce({ url: 'http://127.0.0.1:9', token: 'other', spoolDir: stateDir, machineIdFile, log: cap.log, ...FAST, spoolMaxAgeMs: 86_400_000 }, 50);
  assert.deepEqual(readdirSync(aSpool).filter((n) => n.startsWith('r-')), backlog, 'none of A\'s reports went');
  assert.equal(existsSync(path.join(aSpool, 'counters.json')), false, 'nothing counted in A\'s spool');
  const [warned, ...more] = cap.find('a spool of another destination (an earlier --url or --token, or another agent) holds reports only an agent for that destination sends');
  assert.equal(more.length, 0);
  assert.deepEqual([warned!.dir, warned!.url, warned!.reports, warned!.bytes], [aSpool, m.url, 3, bytes]);
  const oldestAgeMs = warned!.oldestAgeMs as number;
  assert.ok(oldestAgeMs >= started - (twoDaysAgo + 10_000) && oldestAgeMs <= Date.now() - (twoDaysAgo + 10_000), 'the oldest report\'s age');
  // A, back with its service, delivers the whole backlog.
  const a = await runOnce({ url: m.url, token: t.token, spoolDir: stateDir, machineIdFile, log: captureLog().log, ...FAST }, 50);
  assert.deepEqual([a.delivered, a.rejected, a.spooled], [4, [], 0]);
  const series = await call(m.url, 'GET', `/api/v1/host/web-a?from=${twoDaysAgo}&to=${twoDaysAgo + 60_000}`, { token: t.token });
  assert.deepEqual(series.body.timestamps, [1, 2, 3].map((seq) => twoDaysAgo + seq * 10_000));
});

test('reports an older agent left in the state directory, for no known destination, are never sent, and the operator is told', async () => {
  const { stateDir, machineIdFile } = machine();
  const m = await service();
  const t = await m.newTenant();
  mkdirSync(stateDir, { recursive: true });
  const legacy = path.join(stateDir, 'r-0000000000000001-1700000000000.json');
  writeFileSync(legacy, '{"agentId":"old"}');
  const cap = captureLog();
  const r = await runOnce({ url: m.url, token: t.token, spoolDir: stateDir, machineIdFile, log: cap.log, ...FAST }, 50);
  assert.equal(r.delivered, 1, 'only the new report');
  assert.deepEqual(cap.find('reports spooled by an older agent for an unknown destination are left unsent').map((l) => l.reports), [1]);
  assert.ok(existsSync(legacy));
});

/** Runs the real CLI: `host-agent --once ...`; resolves with its exit code and output. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [...nodeEntry('src/agent/cli.ts'), ...args], { cwd: PROJECT_ROOT, env: { ...process.env, HOST_AGENT_LOG_LEVEL: 'silent' } });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
    p.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
    p.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

test('--once: one line and exit 0 when delivered, exit 1 naming the refusal, exit 75 when left spooled; usage errors exit 2 in the one CLI style', async () => {
  const m = await service();
  const t = await m.newTenant();
  const { stateDir, machineIdFile } = machine();
  const common = ['--once', '--spool-dir', stateDir, '--machine-id-file', machineIdFile];
  const ok = await cli([...common, '--url', m.url, '--token', t.token]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(ok.stdout, `host-agent: delivered 1 report to ${m.url} as host ${appSpecificMachineId(MACHINE_ID)}\n`);
  const refused = await cli([...common, '--url', m.url, '--token', 'wrong-token-123']);
  assert.equal(refused.code, 1);
  assert.equal(refused.stderr, `host-agent: the metrics service at ${m.url} refused 1 report: 401 unauthorized: unknown or revoked token\n`);
  const down = await cli([...common, '--url', 'http://127.0.0.1:9', '--token', t.token, '--request-timeout-ms', '500']);
  assert.equal(down.code, 75);
  assert.match(down.stderr, /^host-agent: 1 report left spooled, the metrics service at http:\/\/127\.0\.0\.1:9 is unavailable \(ECONNREFUSED.*\); a later run sends them\n$/);
  const usage = await cli(['--url', m.url, '--token', 't', '--interval-ms', 'soon', '--bogus']);
  assert.equal(usage.code, 2);
  assert.equal(usage.stderr, 'host-agent: unknown option --bogus; --interval-ms / HOST_AGENT_INTERVAL_MS: "soon" is not an integer (see host-agent --help)\n');
});

test('a bad --config file, --agent-id or --hostname is a usage error: exit 2 in the one CLI style, nothing spooled', async () => {
  const { stateDir, machineIdFile } = machine();
  const common = ['--once', '--url', 'http://127.0.0.1:9', '--token', 't', '--spool-dir', stateDir, '--machine-id-file', machineIdFile];
  const config = path.join(dir(), 'config.json');
  writeFileSync(config, '{"services":["cron.service","cron.service"]}');
  const twice = await cli([...common, '--config', config]);
  assert.equal(twice.code, 2);
  assert.equal(twice.stderr, `host-agent: --config / HOST_AGENT_CONFIG: ${config}: /services: "cron.service" is named twice (see host-agent --help)\n`);
  writeFileSync(config, 'no\njson\n');
  const notJson = await cli([...common, '--config', config]);
  assert.equal(notJson.code, 2);
  assert.match(notJson.stderr, /^host-agent: --config \/ HOST_AGENT_CONFIG: .*config\.json: Unexpected token .*"no\\njson\\n" is not valid JSON \(see host-agent --help\)\n$/);
  const missing = await cli([...common, '--config', `${config}.gone`]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /^host-agent: --config \/ HOST_AGENT_CONFIG: .*config\.json\.gone: ENOENT.* \(see host-agent --help\)\n$/);
  const id = await cli([...common, '--agent-id', 'web 1']);
  assert.equal(id.code, 2);
  assert.match(id.stderr, /^host-agent: --agent-id \/ HOST_AGENT_ID: "web 1" is not an agent id: .* \(see host-agent --help\)\n$/);
  assert.equal(existsSync(stateDir), false, 'nothing spooled');
});
