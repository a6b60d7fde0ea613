import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { nodeEntry } from '../helpers/node-entry.js';
import { runCli } from '../../src/metrics/cli-commands.js';
import type { TestStorage } from '../helpers/backends.js';

export type ServiceKind = 'metrics' | 'sync';

/** One service running as its own process (its CLI), so its event loop and crashes are its own. */
export interface RealService {
  url: string;
  child: ChildProcess;
  /** SIGKILL, resolved once the process is gone. */
  kill(): Promise<void>;
}

/** Storage flags of `serve` for a test storage (SQLite directory or PostgreSQL schema). */
export function storageArgs(s: TestStorage): string[] {
  return ['--data-dir', s.dataDir, '--db-schema', s.pgSchema, ...(s.databaseUrl ? ['--database-url', s.databaseUrl] : [])];
}

/** Starts `<kind>-service serve` on an ephemeral port and resolves once it listens. */
export async function spawnService(kind: ServiceKind, storage: TestStorage, extraArgs: string[] = []): Promise<RealService> {
  const args = [...nodeEntry(`src/${kind}/cli.ts`), 'serve', '--port', '0', '--log-level', 'info', ...storageArgs(storage), ...extraArgs];
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env['PATH'] ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (c: Buffer) => { err += String(c); });
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (c: Buffer) => {
      out += String(c);
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        // Keep draining (a full pipe would block the service) without keeping what it says.
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        out = '';
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code, signal) => reject(new Error(`${kind} service exited (${code ?? signal}) before listening:\n${err}${out}`)));
  });
  return {
    url,
    child,
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Creates a metrics tenant and token in the storage, through the real CLI command. */
export async function metricsToken(storage: TestStorage, tenant: string): Promise<string> {
  const lines: string[] = [];
  const env = { DATA_DIR: storage.dataDir, METRICS_DB_SCHEMA: storage.pgSchema, ...(storage.databaseUrl ? { DATABASE_URL: storage.databaseUrl } : {}) };
  const code = await runCli(['token', 'create', tenant], env, { print: (l) => lines.push(l), fail: (l) => lines.push(l) });
  if (code !== 0) throw new Error(`token create failed: ${lines.join('\n')}`);
  return /token: +(mtk_\S+)/.exec(lines.join('\n'))![1]!;
}
