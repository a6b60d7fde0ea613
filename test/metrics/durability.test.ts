import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { runCli } from '../../src/metrics/cli-commands.js';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport } from '../helpers/metrics.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { nodeEntry } from '../helpers/node-entry.js';


function storageEnv(s: TestStorage): Record<string, string> {
  return { DATA_DIR: s.dataDir, METRICS_DB_SCHEMA: s.pgSchema, ...(s.databaseUrl ? { DATABASE_URL: s.databaseUrl } : {}) };
}

/** Starts the real service process (`metrics-service serve`) and resolves with it and its URL once it listens. */
async function spawnServer(s: TestStorage): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...nodeEntry('src/metrics/cli.ts'), 'serve', '--port', '0', '--log-level', 'info'], {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env['PATH'] ?? '', ...storageEnv(s) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
  return { child, url };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

for (const backend of BACKENDS) {
  describe(`durability on ${backend}`, () => {
    test('every report answered 200 survives SIGKILL right after the answers', async (t) => {
      const s = await freshStorage(backend);
      const children: ChildProcess[] = [];
      // Hooks run in the order registered: the processes stop before their schema is dropped.
      t.after(async () => { await Promise.all(children.map(stop)); await s.cleanup(); });
      const lines: string[] = [];
      const env = storageEnv(s);
      assert.equal(await runCli(['token', 'create', 'acme'], env, { print: (l) => lines.push(l), fail: (l) => lines.push(l) }), 0);
      const token = /token: +(mtk_\S+)/.exec(lines.join('\n'))![1]!;

      const first = await spawnServer(s);
      children.push(first.child);
      const now = Date.now();
      const replies = await Promise.all(Array.from({ length: 120 }, (_, i) =>
        ingest(first.url, token, makeReport({ agentId: `host-${i % 6}`, ts: now - i * 1000, cpu: { usage: i % 100 } }))));
      assert.ok(replies.every((r) => r.status === 200), 'all answered 200');
      first.child.kill('SIGKILL');
      await once(first.child, 'exit');

      const second = await spawnServer(s);
      children.push(second.child);
      const hosts = await call(second.url, 'GET', '/api/v1/hosts', { token });
      assert.deepEqual(hosts.body, ['host-0', 'host-1', 'host-2', 'host-3', 'host-4', 'host-5']);
      let stored = 0;
      for (const h of hosts.body as string[]) {
        const series = await call(second.url, 'GET', `/api/v1/host/${h}?from=${now - 200_000}&to=${now}&points=1000`, { token });
        stored += series.body.timestamps.length;
      }
      assert.equal(stored, 120);
    });
  });
}
