import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { SyncClientError } from '../../src/client/index.js';
import { createSqliteStore } from '../../src/client/sqlite.js';
import { device } from './client-fixtures.js';
import { nodeEntry } from '../helpers/node-entry.js';

interface Server { url: string; child: ChildProcess }

/** The real service process (the CLI) on an ephemeral port; waits for its "listening" log line. */
async function startProcess(storage: TestStorage): Promise<Server> {
  const args = [...nodeEntry('src/sync/cli.ts'), 'serve', '--port', '0', '--data-dir', storage.dataDir, '--scrypt-log2n', '10'];
  if (storage.databaseUrl) args.push('--database-url', storage.databaseUrl, '--db-schema', storage.pgSchema);
  const child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += String(c);
      const m = /"address":"(http:\/\/[^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.stderr!.on('data', (c: Buffer) => { out += String(c); });
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before listening:\n${out}`)));
  });
  return { url, child };
}

async function kill({ child }: Server): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

describe('sync client: server killed mid-push', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: SIGKILL during a push and after an unanswered commit; the client (restarted too) retries; nothing lost or duplicated`, async (t) => {
      const storage = await freshStorage(backend);
      const started: Server[] = [];
      // Hooks run in the order registered: the processes stop before their schema is dropped.
      t.after(async () => { await Promise.all(started.map(kill)); await storage.cleanup(); });
      const start = async (): Promise<Server> => { const s = await startProcess(storage); started.push(s); return s; };
      let server = await start();
      // The restarted process listens on another port; the device keeps one base URL, which its network maps to the live process.
      const url = 'http://sync.invalid';
      const live = (input: string | URL | Request) => String(input).replace(url, server.url);
      const u = await newUser(server);
      const b = await newBusiness(server, u);
      const file = path.join(storage.dataDir, 'device.sqlite');

      // What the network does to the next push: `kill-in-flight` kills the server while the request is out;
      // `lose-answer` lets the server commit and answer, then kills it and drops the answer.
      let fault: 'none' | 'kill-in-flight' | 'lose-answer' = 'none';
      let pushes = 0;
      const faultyFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const isPush = String(input).endsWith('/api/sync/push');
        if (isPush && ++pushes === 2 && fault === 'kill-in-flight') {
          const pending = fetch(live(input), init);
          setTimeout(() => void kill(server), 5);
          return pending;
        }
        if (isPush && fault === 'lose-answer') {
          fault = 'none';
          const res = await fetch(live(input), init);
          await res.arrayBuffer();
          await kill(server);
          throw new TypeError('fetch failed (connection reset)');
        }
        return fetch(live(input), init);
      };

      let client = await device(url, u, b.id, { store: createSqliteStore(file), fetch: faultyFetch, pushBatchSize: 500 });
      const ids: string[] = [];
      for (let i = 0; i < 1500; i++) {
        const id = randomUUID();
        ids.push(id);
        await client.put('invoices', id, { n: i, total: i * 10 });
      }
      fault = 'kill-in-flight';
      await assert.rejects(client.sync(), (e: unknown) => { return e instanceof SyncClientError && e.code === 'network'; });
      // The device crashes as well: only what its SQLite file holds survives.
      await client.close();
      fault = 'none';
      server = await start();
      client = await device(url, u, b.id, { store: createSqliteStore(file), fetch: faultyFetch, pushBatchSize: 500 });
      assert.ok(client.pendingChanges > 0 && client.pendingChanges <= 1000, `queued after the crash: ${client.pendingChanges}`);
      await client.sync();
      assert.equal(client.pendingChanges, 0);

      for (let i = 0; i < 500; i++) {
        const id = randomUUID();
        ids.push(id);
        await client.put('invoices', id, { n: 1500 + i });
      }
      fault = 'lose-answer';
      await assert.rejects(client.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
      assert.equal(client.pendingChanges, 500, 'an unanswered push stays queued');
      server = await start();
      await client.sync();
      assert.equal(client.pendingChanges, 0);

      const all: { record_uuid: string; record_version: number }[] = [];
      for (let since = 0; ;) {
        const r = await call(server.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id }, json: { since_version: since, limit: 1000 } });
        all.push(...r.body.changes);
        since = r.body.version;
        if (!r.body.has_more) break;
      }
      assert.equal(all.length, 2000, 'one change per record: nothing lost, nothing applied twice');
      assert.deepEqual(all.map((c) => c.record_uuid).sort(), [...ids].sort());
      assert.ok(all.every((c) => c.record_version === 1));
      assert.equal(client.pulledVersion, 2000);
      assert.equal((await client.list('invoices')).length, 2000);
      await client.close();
    });
  }
});
