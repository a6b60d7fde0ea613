// A host whose disk is full is the host to watch: the agent keeps reporting from memory when its spool cannot be
// written, says so, and says what is lost when it stops first. Its state directory is a real full tmpfs
// (test/helpers/tmpfs.ts); the last test needs no disk of its own.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { nodeEntry } from '../helpers/node-entry.js';
import { call } from '../helpers/http.js';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { spawnOnTmpfs, tmpfsSkip } from '../helpers/tmpfs.js';
import { captureLog, tempDir, waitFor } from './agent-harness.js';
import { startAgent } from '../../src/agent/start-agent.js';

const skip = tmpfsSkip('the agent\'s full-disk tests');
const MACHINE_ID = '0123456789abcdef0123456789abcdef';

const cleanup: Array<() => Promise<void> | void> = [];
after(async () => { for (const f of cleanup.reverse()) await f(); });

async function service(): Promise<MetricsHarness> {
  const m = await startMetrics('sqlite');
  cleanup.push(() => m.close());
  return m;
}

/** The agent's CLI with its state directory `<tmpfs>/state` on a full tmpfs; `root` reaches the tmpfs from here. */
function agentOnFullDisk(args: string[]) {
  const d = tempDir('agent-full-');
  const machineIdFile = path.join(tempDir('agent-machine-'), 'machine-id');
  writeFileSync(machineIdFile, `${MACHINE_ID}\n`);
  cleanup.push(() => { rmSync(d, { recursive: true, force: true }); rmSync(path.dirname(machineIdFile), { recursive: true, force: true }); });
  // 64 KiB, all of it taken by the filler: not one report's file fits.
  // No floor: what the disk itself does when it is full (the floor is spool.test.ts's).
  const child = spawnOnTmpfs(d, '64k', 64 * 1024, [[process.execPath, ...nodeEntry('src/agent/cli.ts'), '--spool-dir', `${d}/state`, '--machine-id-file', machineIdFile, '--spool-min-free-bytes', '0', ...args]],
    { HOST_AGENT_LOG_LEVEL: 'info' });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString(); });
  const exit = once(child, 'exit') as Promise<[number | null]>;
  return { child, root: () => `/proc/${child.pid}/root${d}`, out: () => ({ stdout, stderr }), exit };
}

const timestamps = async (m: MetricsHarness, token: string, host: string) =>
  ((await call(m.url, 'GET', `/api/v1/host/${host}?from=0&to=${Date.now() + 60_000}`, { token })).body as { timestamps?: number[] }).timestamps ?? [];

test('--once with the spool\'s disk full: the report is delivered from memory, exit 0; with the service down too, exit 75 saying it is lost', { skip }, async () => {
  const m = await service();
  const t = await m.newTenant();
  const ok = agentOnFullDisk(['--once', '--url', m.url, '--token', t.token, '--agent-id', 'full-1']);
  const [code] = await ok.exit;
  assert.equal(code, 0, ok.out().stderr);
  assert.equal(ok.out().stdout, `host-agent: delivered 1 report to ${m.url} as host full-1\n`);
  assert.match(ok.out().stderr, /the spool cannot be written: reports are held in memory until it can, and lost if the agent stops first.*ENOSPC/);
  assert.match(ok.out().stderr, /the spool directory could not be labelled with its URL/);
  assert.equal((await timestamps(m, t.token, 'full-1')).length, 1);

  const down = agentOnFullDisk(['--once', '--url', 'http://127.0.0.1:9', '--token', t.token, '--agent-id', 'full-2', '--request-timeout-ms', '500']);
  const [downCode] = await down.exit;
  assert.equal(downCode, 75, down.out().stderr);
  assert.match(down.out().stderr, /^host-agent: 1 report not delivered, the metrics service at http:\/\/127\.0\.0\.1:9 is unavailable \(ECONNREFUSED.*\); 1 could not be written to the spool \(its disk full\?\) and is lost$/m);
});

test('a running agent on a full disk keeps reporting from memory, once space is freed writes its spool again, and stops cleanly', { skip }, async () => {
  const m = await service();
  const t = await m.newTenant();
  const a = agentOnFullDisk(['--url', m.url, '--token', t.token, '--agent-id', 'full-3', '--interval-ms', '200', '--retry-base-ms', '20', '--retry-max-ms', '200']);
  cleanup.push(() => { a.child.kill('SIGKILL'); });
  await waitFor('three reports delivered from memory', async () => (await timestamps(m, t.token, 'full-3')).length >= 3, 15_000);
  assert.equal(a.out().stderr.split('\n').filter((l) => l.includes('the spool cannot be written')).length, 1, 'said once');
  rmSync(`${a.root()}/filler`);
  await waitFor('the spool written again', () => a.out().stderr.includes('the spool can be written again'), 15_000);
  const before = (await timestamps(m, t.token, 'full-3')).length;
  await waitFor('reports after the recovery', async () => (await timestamps(m, t.token, 'full-3')).length >= before + 2, 15_000);
  a.child.kill('SIGTERM');
  const [code] = await a.exit;
  assert.equal(code, 0, a.out().stderr);
  assert.doesNotMatch(a.out().stderr, /they are lost/);
  const stored = await timestamps(m, t.token, 'full-3');
  assert.deepEqual(stored, [...new Set(stored)].sort((x, y) => x - y), 'each report once, in order');
});

test('a running agent stopped while the service is away and its spool cannot be written says how many reports are lost', async () => {
  const stateDir = tempDir('agent-lost-');
  cleanup.push(() => rmSync(stateDir, { recursive: true, force: true }));
  const cap = captureLog();
  const agent = await startAgent({
    url: 'http://127.0.0.1:9', token: 'tok-lost-0123456789', spoolDir: stateDir, agentId: 'lost-1',
    intervalMs: 100, retryBaseMs: 20, retryMaxMs: 50, requestTimeoutMs: 500, shutdownTimeoutMs: 500, log: cap.log,
  });
  // The spool directory replaced by a file: every write fails (ENOTDIR), as root on a full disk would; the service is
  // away, so nothing leaves, and the stop's last try to write the held reports fails too.
  rmSync(agent.spool.dir, { recursive: true, force: true });
  writeFileSync(agent.spool.dir, '');
  await waitFor('two reports held', () => agent.spool.inMemory >= 2);
  await agent.stop();
  const lost = cap.find('stopping with reports the spool could not take (its disk full?): they are lost');
  assert.equal(lost.length, 1);
  assert.ok(Number(lost[0]!['lost']) >= 2, `lost: ${String(lost[0]!['lost'])}`);
  assert.equal(cap.find('host agent stopped').length, 1);
});
