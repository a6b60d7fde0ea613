import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/core/paths.js';
import { BACKENDS, freshStorage } from './helpers/backends.js';
import { call } from './helpers/http.js';

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

async function until<T>(fn: () => Promise<T | undefined>, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

for (const backend of BACKENDS) test(`npm start runs both services and an agent on ${backend}; the printed token shows this machine on the dashboard`, async (t) => {
  const storage = await freshStorage(backend);
  const syncStorage = await freshStorage(backend);
  t.after(() => Promise.all([storage.cleanup(), syncStorage.cleanup()]));
  const dataDir = storage.dataDir;
  // With DATABASE_URL the first token must be created where the metrics service reads it.
  const databaseEnv = storage.databaseUrl ? { DATABASE_URL: storage.databaseUrl, METRICS_DB_SCHEMA: storage.pgSchema, SYNC_DB_SCHEMA: syncStorage.pgSchema } : {};
  const [metricsPort, syncPort] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'src/start.ts'), '--data-dir', dataDir, '--metrics-port', String(metricsPort), '--sync-port', String(syncPort)], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    // A short agent interval so the first report comes in well under a second.
    env: { ...process.env, ...databaseEnv, HOST_AGENT_INTERVAL_MS: '500', LOG_LEVEL: 'warn', HOST_AGENT_LOG_LEVEL: 'warn' },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += String(c); });
  child.stderr.on('data', (c: Buffer) => { out += String(c); });
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });

  const token = await until(async () => /\b(mtk_[A-Za-z0-9_-]{43})\b/.exec(out)?.[1], `the token in:\n${out}`);
  assert.equal(statSync(path.join(dataDir, 'quickstart.json')).mode & 0o777, 0o600, 'the kept token is readable by its owner only');
  const metrics = `http://127.0.0.1:${metricsPort}`;
  const hosts = await until(async () => {
    const r = await call(metrics, 'GET', '/api/v1/hosts', { token });
    return Array.isArray(r.body) && r.body.length === 1 ? (r.body as string[]) : undefined;
  }, 'the agent\'s first report');
  assert.deepEqual(hosts, [readFileSync(path.join(dataDir, 'agent-spool', 'agent-id'), 'utf8').trim()], 'the host is the local agent, under its agent id');
  const page = await call(metrics, 'GET', '/', { token, headers: { accept: 'text/html' } });
  assert.equal(page.status, 200);
  assert.ok(page.text.includes(os.hostname()), 'the dashboard lists this machine');
  const sync = await call(`http://127.0.0.1:${syncPort}`, 'GET', '/healthz');
  assert.equal(sync.status, 200);

  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  assert.equal(code, 0, out);
});
