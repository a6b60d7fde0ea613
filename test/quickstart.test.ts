import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { appSpecificMachineId, persistentAgentId } from '../src/agent/agent-id.js';
import { SERVICE_ENV, SERVICE_V8_FLAGS } from '../src/core/cli/heap-flags.js';
import { PROJECT_ROOT } from '../src/core/paths.js';
import { BACKENDS, freshStorage } from './helpers/backends.js';
import { call } from './helpers/http.js';
import { nodeEntry } from './helpers/node-entry.js';
import { runCli } from '../src/metrics/cli-commands.js';

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** `what` may be a function, read when the wait times out (the output so far, say). */
async function until<T>(fn: () => Promise<T | undefined>, what: string | (() => string), timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

for (const backend of BACKENDS) test(`npm start runs both services and an agent on ${backend}; the printed token shows this machine on the dashboard`, async (t) => {
  const storage = await freshStorage(backend);
  const syncStorage = await freshStorage(backend);
  const dataDir = storage.dataDir;
  // With DATABASE_URL the first token must be created where the metrics service reads it.
  const databaseEnv = storage.databaseUrl ? { DATABASE_URL: storage.databaseUrl, METRICS_DB_SCHEMA: storage.pgSchema, SYNC_DB_SCHEMA: syncStorage.pgSchema } : {};
  const [metricsPort, syncPort] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, [...nodeEntry('src/start.ts'), '--data-dir', dataDir, '--metrics-port', String(metricsPort), '--sync-port', String(syncPort)], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    // A short agent interval so the first report comes in well under a second.
    env: { ...process.env, ...databaseEnv, HOST_AGENT_INTERVAL_MS: '500', LOG_LEVEL: 'warn', HOST_AGENT_LOG_LEVEL: 'warn' },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += String(c); });
  child.stderr.on('data', (c: Buffer) => { out += String(c); });
  // The whole tree stops before the schemas are dropped.
  t.after(async () => {
    for (const p of [child.pid!, ...descendants(child.pid!)]) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } }
    await Promise.all([storage.cleanup(), syncStorage.cleanup()]);
  });

  const token = await until(async () => /\b(mtk_[A-Za-z0-9_-]{43})\b/.exec(out)?.[1], `the token in:\n${out}`);
  assert.equal(statSync(path.join(dataDir, 'quickstart.json')).mode & 0o777, 0o600, 'the kept token is readable by its owner only');
  const metrics = `http://127.0.0.1:${metricsPort}`;
  const hosts = await until(async () => {
    const r = await call(metrics, 'GET', '/api/v1/hosts', { token });
    return Array.isArray(r.body) && r.body.length === 1 ? (r.body as string[]) : undefined;
  }, () => `the agent's first report; the output so far:\n${out}`);
  const machineId = existsSync('/etc/machine-id') ? appSpecificMachineId(readFileSync('/etc/machine-id', 'utf8')) : undefined;
  assert.deepEqual(hosts, [machineId ?? await persistentAgentId(path.join(dataDir, 'agent-spool'))], 'the host is the local agent, under the machine\'s agent id');
  const page = await call(metrics, 'GET', '/', { token, headers: { accept: 'text/html' } });
  assert.equal(page.status, 200);
  assert.ok(page.text.includes(os.hostname()), 'the dashboard lists this machine');
  const sync = await call(`http://127.0.0.1:${syncPort}`, 'GET', '/healthz');
  assert.equal(sync.status, 200);

  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  assert.equal(code, 0, out);
});

/** Every live descendant of `pid` (from /proc), so a test can tell whether a process tree is gone. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      const ppid = Number(fields[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch { /* exited meanwhile */ }
  }
  const out: number[] = [];
  const walk = (p: number) => { for (const c of children.get(p) ?? []) { out.push(c); walk(c); } };
  walk(pid);
  return out;
}

function alive(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return state.slice(state.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function startLauncher(command: string[], dataDir: string, ports: { metrics: number; sync: number }, extraEnv: Record<string, string> = {}, detached = false) {
  const child = spawn(command[0]!, [...command.slice(1), '--data-dir', dataDir, '--metrics-port', String(ports.metrics), '--sync-port', String(ports.sync)], {
    cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached,
    env: { ...process.env, HOST_AGENT_INTERVAL_MS: '500', LOG_LEVEL: 'warn', HOST_AGENT_LOG_LEVEL: 'warn', ...extraEnv },
  });
  const output = { text: '' };
  child.stdout.on('data', (c: Buffer) => { output.text += String(c); });
  child.stderr.on('data', (c: Buffer) => { output.text += String(c); });
  return { child, output };
}

const TREE_TIMEOUT = 300_000;
const BANNER = /\bmtk_[A-Za-z0-9_-]{43}\b/;

/**
 * `command` (npm start, or the launcher itself) on fresh storage and ports, the whole tree killed after the test;
 * resolves once `ready` holds for its output, with the processes under it.
 */
async function runningTree(t: TestContext, command: string[], opts: { detached?: boolean; env?: Record<string, string>; ready?: (out: string) => boolean } = {}) {
  const storage = await freshStorage('sqlite');
  t.after(() => storage.cleanup());
  const ports = { metrics: await freePort(), sync: await freePort() };
  const { child, output } = await startLauncher(command, storage.dataDir, ports, opts.env, opts.detached);
  t.after(() => { for (const p of [child.pid!, ...descendants(child.pid!)]) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } } });
  const ready = opts.ready ?? ((out: string) => BANNER.test(out));
  // The build may run first (stale dist/): allow for it.
  await until(async () => (ready(output.text) ? true : undefined), `the banner in:\n${output.text}`, TREE_TIMEOUT - 60_000);
  return { child, output, ports, tree: descendants(child.pid!) };
}

/** Waits until none of `tree` is alive; names the ones that are if they outlive 30 s. */
async function allGone(tree: number[], what: string): Promise<void> {
  await until(async () => (tree.every((p) => !alive(p)) ? true : undefined), what, 30_000).catch((e: unknown) => {
    throw new Error(`${String(e)}; alive: ${tree.filter(alive).map((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ')).join(' | ')}`);
  });
}

test('SIGTERM to `npm start` stops the whole process tree: npm, the launcher, both services and the agent; the ports are free again', { timeout: TREE_TIMEOUT }, async (t) => {
  const { child, ports, tree } = await runningTree(t, ['npm', 'start', '--']);
  assert.ok(tree.length >= 4, `npm's tree holds the launcher, two services and the agent: ${tree.length} processes`);
  const commandLines = tree.map((p) => { try { return readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' '); } catch { return ''; } });
  assert.ok(!/\bsh -c\b/.test(commandLines.join('\n')), 'no shell chain between npm and node');
  // In a fresh checkout this start built dist/ first: esbuild's service process is not kept beside the launcher.
  assert.ok(!/esbuild/.test(commandLines.join('\n')), commandLines.join('\n'));
  // The launcher passes the metrics service its heap flags and environment (an exec would lose the IPC channel it watches).
  const metricsPid = tree.find((p, i) => /metrics\/cli\.[jt]s serve/.test(commandLines[i]!));
  assert.ok(metricsPid !== undefined && SERVICE_V8_FLAGS.every((f) => commandLines[tree.indexOf(metricsPid)]!.includes(f)), commandLines.join('\n'));
  const metricsEnv = readFileSync(`/proc/${metricsPid}/environ`, 'utf8').split('\0');
  for (const [k, v] of Object.entries(SERVICE_ENV)) assert.ok(metricsEnv.includes(`${k}=${v}`), `${k}=${v} in the metrics service's environment`);
  child.kill('SIGTERM');
  await once(child, 'exit');
  await allGone(tree, 'every process of the tree to exit');
  for (const port of [ports.metrics, ports.sync]) {
    const server = createServer();
    await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(port, '127.0.0.1', resolve); });
    server.close();
  }
});

test('SIGHUP to npm, which exits without passing it on, stops the whole tree as well', { timeout: TREE_TIMEOUT }, async (t) => {
  const { child, tree } = await runningTree(t, ['npm', 'start', '--']);
  assert.ok(tree.length >= 4, `npm's tree holds the launcher, two services and the agent: ${tree.length} processes`);
  child.kill('SIGHUP');
  await once(child, 'exit');
  await allGone(tree, 'every process of the tree to exit');
});

// A terminal's Ctrl-C signals its whole foreground process group. The services are in groups of their own, so each
// gets the launcher's one SIGTERM and drains; in the terminal's group they got SIGINT and SIGTERM at once, and a
// second signal means "exit now".
test('Ctrl-C (SIGINT to the terminal\'s process group) stops the services by one signal each: they drain, none is cut short, not even by a browser\'s idle preconnected socket', async (t) => {
  const { child, output, ports, tree } = await runningTree(t, [process.execPath, ...nodeEntry('src/start.ts')], {
    detached: true, env: { LOG_LEVEL: 'info', HOST_AGENT_LOG_LEVEL: 'info' },
    ready: (out) => BANNER.test(out) && out.includes('host agent started'),
  });
  assert.equal(tree.length, 3, 'two services and the agent');
  // A connection that never sends a request, as browsers open ahead of need: it once held a service's exit until its
  // shutdown bound cut it short (exit 1, database not closed).
  const idle = await Promise.all([ports.metrics, ports.sync].map(async (port) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    return socket;
  }));
  t.after(() => { for (const s of idle) s.destroy(); });
  process.kill(-child.pid!, 'SIGINT');
  const [code] = await once(child, 'exit') as [number | null];
  await allGone(tree, 'the services and the agent to exit');
  assert.equal(code, 0, output.text);
  assert.doesNotMatch(output.text, /second signal|shutdown timed out/, output.text);
  // Both services and the agent logged their one signal: the launcher's SIGTERM.
  const signals = [...output.text.matchAll(/"signal":"(SIG[A-Z]+)"/g)].map((m) => m[1]);
  assert.deepEqual(signals, ['SIGTERM', 'SIGTERM', 'SIGTERM'], output.text);
});

test('children die with the launcher even when it is killed outright (SIGKILL)', async (t) => {
  const { child, tree } = await runningTree(t, [process.execPath, ...nodeEntry('src/start.ts')]);
  assert.equal(tree.length, 3, 'two services and the agent');
  child.kill('SIGKILL');
  await allGone(tree, 'the orphaned services and agent to stop');
});

test('a later start whose database does not know the kept token (revoked; DATABASE_URL set since) prints and keeps a new one that works', async (t) => {
  const storage = await freshStorage('sqlite');
  t.after(() => storage.cleanup());
  /** One start without the agent until its banner: the printed token, and what /api/v1/hosts answers it. */
  const startAndAsk = async () => {
    const ports = { metrics: await freePort(), sync: await freePort() };
    const { child, output } = await startLauncher([process.execPath, ...nodeEntry('src/start.ts'), '--agent=false'], storage.dataDir, ports);
    t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
    const token = await until(async () => BANNER.exec(output.text)?.[0], () => `the banner in:\n${output.text}`);
    const status = (await call(`http://127.0.0.1:${ports.metrics}`, 'GET', '/api/v1/hosts', { token })).status;
    child.kill('SIGTERM');
    await once(child, 'exit');
    return { token, status, text: output.text };
  };
  const first = await startAndAsk();
  assert.equal(first.status, 200);
  const kept = JSON.parse(readFileSync(path.join(storage.dataDir, 'quickstart.json'), 'utf8')) as { tokenId: string; token: string };
  assert.equal(kept.token, first.token);
  const lines: string[] = [];
  assert.equal(await runCli(['token', 'revoke', kept.tokenId], { DATA_DIR: storage.dataDir }, { print: (l) => lines.push(l), fail: (l) => lines.push(l) }), 0, lines.join('\n'));
  const second = await startAndAsk();
  assert.notEqual(second.token, first.token);
  assert.equal(second.status, 200, 'the printed token works');
  assert.match(second.text, /the kept one is not known to this database/);
  assert.equal(JSON.parse(readFileSync(path.join(storage.dataDir, 'quickstart.json'), 'utf8')).token, second.token, 'and is kept for the next start');
  assert.equal(statSync(path.join(storage.dataDir, 'quickstart.json')).mode & 0o777, 0o600);
  const third = await startAndAsk();
  assert.equal(third.token, second.token, 'a kept token the database knows is used as it is');
});

test('a second start on a port in use says so in one line, exits 1 and starts nothing', async (t) => {
  const storage = await freshStorage('sqlite');
  t.after(() => storage.cleanup());
  const holder = createServer().listen(0, '127.0.0.1');
  await once(holder, 'listening');
  t.after(() => holder.close());
  const ports = { metrics: (holder.address() as { port: number }).port, sync: await freePort() };
  const { child, output } = await startLauncher([process.execPath, ...nodeEntry('src/start.ts')], storage.dataDir, ports);
  const [code] = await once(child, 'exit');
  assert.equal(code, 1);
  assert.equal(output.text, `npm start: 127.0.0.1:${ports.metrics} is in use: is fleetsync already running? --metrics-port chooses another\n`);
  assert.deepEqual(readdirSync(storage.dataDir), [], 'no database, token or spool was created');
});

test('npm start: bad options in the one CLI error style (exit 2); --help answers from the sources without building', async () => {
  const bad = spawnSync(process.execPath, [...nodeEntry('src/start.ts'), '--metrics-port', 'x'], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.equal(bad.stderr, 'npm start: --metrics-port / METRICS_PORT: "x" is not an integer (see npm start -- --help)\n');
  const same = spawnSync(process.execPath, [...nodeEntry('src/start.ts'), '--metrics-port', '18099', '--sync-port', '18099'], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  assert.equal(same.status, 2);
  assert.equal(same.stderr, 'npm start: --metrics-port and --sync-port: both are 18099; the two services need a port each (see npm start -- --help)\n');
  const stamp = path.join(PROJECT_ROOT, 'dist', '.build-complete');
  const before = existsSync(stamp) ? statSync(stamp).mtimeMs : undefined;
  const help = spawnSync(process.execPath, [path.join(PROJECT_ROOT, 'scripts/start.mjs'), '--help'], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /--metrics-port/);
  assert.doesNotMatch(help.stderr, /building/);
  assert.equal(existsSync(stamp) ? statSync(stamp).mtimeMs : undefined, before, 'no build ran');
  assert.match(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8'), /"start": "exec node scripts\/start\.mjs"/, 'npm\'s shell execs node: no build && node chain');
});
