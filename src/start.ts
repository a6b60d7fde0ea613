#!/usr/bin/env node
/**
 * `npm start`: the quick start on one machine. Runs the metrics service, the
 * sync service and a host agent reporting this machine, each its own process,
 * on the embedded SQLite default. On the first run it creates the tenant
 * "default" and a token, prints the token, and keeps it in
 * `<data-dir>/quickstart.json` (mode 0600) because the local agent needs it
 * on every start, as an agent's own config file would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXIT_USAGE, portInUseMessage, usageError } from './core/cli/cli-error.js';
import { SERVICE_ENV, SERVICE_V8_FLAGS } from './core/cli/heap-flags.js';
import { ConfigError, helpText, loadConfig, opt } from './core/config.js';
import { loadMetricsConfig } from './metrics/config.js';
import { createMetricsStore, openMetricsDatabase } from './metrics/deps.js';
import { issueToken, resolveTenant } from './metrics/domain/tenant-tokens.js';
import { makeDir } from './core/make-dir.js';

const startOptions = {
  dataDir: opt.string({ flag: 'data-dir', env: 'DATA_DIR', default: './data', doc: 'Directory for both services\' SQLite files, the agent spool and quickstart.json.' }),
  metricsPort: opt.int({ flag: 'metrics-port', env: 'METRICS_PORT', default: 8080, min: 1, max: 65535, doc: 'Port of the metrics service.' }),
  syncPort: opt.int({ flag: 'sync-port', env: 'SYNC_PORT', default: 8081, min: 1, max: 65535, doc: 'Port of the sync service.' }),
  agent: opt.bool({ flag: 'agent', env: 'QUICKSTART_AGENT', default: true, doc: 'Run a host agent reporting this machine (--agent=false to skip).' }),
};

interface Quickstart { tenant: string; tokenId: string; token: string }

const PROGRAM = 'npm start';

const here = path.dirname(fileURLToPath(import.meta.url));
// Run from the build (node dist/start.js) the children are compiled JS; run from source (tsx), TypeScript.
const fromSource = import.meta.url.endsWith('.ts');
const children: ChildProcess[] = [];

async function firstToken(dataDir: string, env: Record<string, string | undefined>): Promise<{ qs: Quickstart; created: boolean; replaced: boolean }> {
  const file = path.join(dataDir, 'quickstart.json');
  // The same storage settings as the metrics child gets (DATABASE_URL included), so the token lands where it reads.
  const config = loadMetricsConfig(['--data-dir', dataDir], env);
  const database = await openMetricsDatabase(config);
  const store = createMetricsStore(database, config);
  try {
    const kept = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) as Quickstart : undefined;
    // A kept token this storage does not know (DATABASE_URL set since, the database replaced, the token revoked) would
    // be printed and refused, and the local agent's every report dropped: a new one is made instead.
    if (kept && await resolveTenant(store, kept.token)) return { qs: kept, created: false, replaced: false };
    const t = await issueToken(store, 'default');
    const qs = { tenant: t.tenantName, tokenId: t.tokenId, token: t.token };
    writeFileSync(file, JSON.stringify(qs, null, 2) + '\n', { mode: 0o600 });
    return { qs, created: true, replaced: kept !== undefined };
  } finally {
    await store.close();
    await database.close();
  }
}

function run(name: string, script: string, args: string[], env: Record<string, string>, nodeFlags: readonly string[] = []): ChildProcess {
  const entry = fromSource ? ['--import', 'tsx', path.join(here, script.replace(/\.js$/, '.ts'))] : [path.join(here, script)];
  // The IPC channel is the children's lifeline: it closes when the launcher dies, even by SIGKILL, and they stop (exitWithParent).
  // It does not survive an exec, so a child that would re-execute itself with its heap flags (and environment) gets them here instead.
  // Detached (a process group of its own): Ctrl-C or a closed terminal signals the launcher alone, which stops each child
  // with one SIGTERM. In the terminal's group, a child got the terminal's SIGINT and then the launcher's SIGTERM, and
  // took the second signal as "exit now" instead of draining.
  const child = spawn(process.execPath, [...nodeFlags, ...entry, ...args], { detached: true, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`${name} exited (${signal ?? code}); stopping the others`);
      stop(1);
    }
  });
  children.push(child);
  return child;
}

/** Waits for /healthz; says every 10 s what it is waiting for, since migrations of a large database take a while. */
async function waitUntilServing(name: string, url: string, timeoutMs = 600_000): Promise<void> {
  const started = Date.now();
  let told = started;
  for (;;) {
    try {
      await fetch(url);
      return;
    } catch {
      if (stopping) return;
      if (Date.now() - started > timeoutMs) throw new Error(`${url} did not answer within ${timeoutMs / 1000} s`);
      if (Date.now() - told >= 10_000) {
        told = Date.now();
        console.error(`${PROGRAM}: still waiting for the ${name} (${Math.round((told - started) / 1000)} s; database migrations run at its start)`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Whether nothing listens on host:port: checked before anything starts, so a second `npm start` starts nothing. */
function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * Under `npm start`, npm is the parent, and npm passes SIGINT and SIGTERM on but exits on SIGHUP (and on SIGKILL)
 * without a word to its child: the launcher then stops too, when it finds it has a new parent.
 */
function stopWithNpm(): void {
  if (process.env['npm_lifecycle_event'] !== 'start') return;
  const npm = process.ppid;
  setInterval(() => { if (process.ppid !== npm) stop(0); }, 500).unref();
}

let stopping = false;
function stop(code: number): void {
  if (stopping) return;
  stopping = true;
  const running = children.filter((c) => c.exitCode === null && c.signalCode === null);
  for (const c of running) c.kill('SIGTERM');
  let left = running.length;
  if (!left) process.exit(code);
  for (const c of running) c.once('exit', () => { if (--left === 0) process.exit(code); });
  setTimeout(() => process.exit(code), 15_000).unref();
}

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(helpText('npm start: both services and a local agent on the embedded default', startOptions));
    return;
  }
  const o = loadConfig(startOptions, { argv: process.argv.slice(2), env: process.env });
  const hosts = { metrics: process.env['METRICS_HOST'] ?? '127.0.0.1', sync: process.env['SYNC_HOST'] ?? '127.0.0.1' };
  // Both free before either listens, then the second found its port taken by the first, with a message blaming another start.
  if (o.metricsPort === o.syncPort && hosts.metrics === hosts.sync) {
    throw new ConfigError([`--metrics-port and --sync-port: both are ${o.metricsPort}; the two services need a port each`]);
  }
  for (const [host, port, option] of [[hosts.metrics, o.metricsPort, '--metrics-port'], [hosts.sync, o.syncPort, '--sync-port']] as const) {
    if (!(await portFree(host, port))) {
      console.error(portInUseMessage(PROGRAM, `${host}:${port}`, option, 'is fleetsync already running?'));
      process.exit(1);
    }
  }
  // `on`, not `once`: under npm, Ctrl-C comes twice (from the terminal, and passed on by npm).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(0));
  stopWithNpm();
  const dataDir = path.resolve(o.dataDir);
  makeDir(dataDir, 0o700, 'the data directory');
  console.error(`${PROGRAM}: opening the database in ${dataDir} (migrations run on the first start and after upgrades)...`);
  const { qs, created, replaced } = await firstToken(dataDir, process.env);

  const metricsUrl = `http://127.0.0.1:${o.metricsPort}`;
  const syncUrl = `http://127.0.0.1:${o.syncPort}`;
  run('metrics service', 'metrics/cli.js', ['serve'], { ...SERVICE_ENV, ...process.env, DATA_DIR: dataDir, METRICS_PORT: String(o.metricsPort) }, SERVICE_V8_FLAGS);
  run('sync service', 'sync/cli.js', ['serve'], { DATA_DIR: dataDir, SYNC_PORT: String(o.syncPort) });
  await Promise.all([waitUntilServing('metrics service', `${metricsUrl}/healthz`), waitUntilServing('sync service', `${syncUrl}/healthz`)]);
  if (stopping) return;
  if (o.agent) {
    run('host agent', 'agent/cli.js', [], {
      HOST_AGENT_URL: metricsUrl,
      HOST_AGENT_TOKEN: qs.token,
      HOST_AGENT_SPOOL_DIR: path.join(dataDir, 'agent-spool'),
    });
  }

  console.log(`
  metrics service  ${metricsUrl}   dashboard: ${metricsUrl}/signin
  sync service     ${syncUrl}
  tenant "${qs.tenant}" token${created ? ` (new${replaced ? ': the kept one is not known to this database' : ''}; also kept in ${path.join(dataDir, 'quickstart.json')})` : ''}:

      ${qs.token}

  try:
      curl -s -H "Authorization: Bearer ${qs.token}" ${metricsUrl}/api/v1/hosts
      curl -s -X POST ${syncUrl}/api/auth/register -H 'content-type: application/json' \\
           -d '{"email":"me@example.com","name":"Me","password":"correct horse battery"}'
${o.agent ? '  an agent reports this machine every 10 s; the dashboard shows it after the first report.\n' : ''}  Ctrl-C stops everything.
`);
}

main().catch((e: unknown) => {
  if (e instanceof ConfigError) {
    console.error(usageError(PROGRAM, e.problems, 'npm start -- --help'));
    process.exit(EXIT_USAGE);
  }
  console.error(`${PROGRAM}: ${e instanceof Error ? e.message : String(e)}`);
  stop(1);
  if (!children.length) process.exit(1);
});
