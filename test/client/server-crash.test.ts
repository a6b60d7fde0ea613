import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { SyncClientError } from '../../src/client/index.js';
import { createSqliteStore } from '../../src/client/sqlite.js';
import { device } from './client-fixtures.js';

async function freePort(): Promise<number> {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  srv.close();
  await once(srv, 'close');
  return port;
}

/** The real service process (the CLI), on a fixed port so a restart keeps the client's base URL. */
async function startProcess(storage: TestStorage, port: number): Promise<ChildProcess> {
  const args = ['--import', 'tsx', path.join(PROJECT_ROOT, 'src/sync/cli.ts'), 'serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', storage.dataDir, '--scrypt-log2n', '10'];
  if (storage.databaseUrl) args.push('--database-url', storage.databaseUrl, '--db-schema', storage.pgSchema);
  const child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += String(c);
      if (out.includes('"address":"http')) resolve();
    });
    child.stderr!.on('data', (c: Buffer) => { out += String(c); });
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before listening:\n${out}`)));
  });
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

describe('sync client: server killed mid-push', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: SIGKILL during a push and after an unanswered commit; the client (restarted too) retries; nothing lost or duplicated`, async (t) => {
      const storage = await freshStorage(backend);
      t.after(() => storage.cleanup());
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      let server = await startProcess(storage, port);
      t.after(() => kill(server));
      const u = await newUser({ url });
      const b = await newBusiness({ url }, u);
      const file = path.join(storage.dataDir, 'device.sqlite');

      // What the network does to the next push: `kill-in-flight` kills the server while the request is out;
      // `lose-answer` lets the server commit and answer, then kills it and drops the answer.
      let fault: 'none' | 'kill-in-flight' | 'lose-answer' = 'none';
      let pushes = 0;
      const faultyFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const isPush = String(input).endsWith('/api/sync/push');
        if (isPush && ++pushes === 2 && fault === 'kill-in-flight') {
          const pending = fetch(input, init);
          setTimeout(() => void kill(server), 5);
          return pending;
        }
        if (isPush && fault === 'lose-answer') {
          fault = 'none';
          const res = await fetch(input, init);
          await res.arrayBuffer();
          await kill(server);
          throw new TypeError('fetch failed (connection reset)');
        }
        return fetch(input, init);
      };

      let client = await device(url, u, b.id, { store: createSqliteStore(file), fetch: faultyFetch, pushBatchSize: 500 });
      const ids: string[] = [];
      for (let i = 0; i < 1500; i++) {
        const id = randomUUID();
        ids.push(id);
        await client.put('invoices', id, { n: i, total: i * 10 });
      }
      fault = 'kill-in-flight';
      await assert.rejects(client.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
      // The device crashes as well: only what its SQLite file holds survives.
      await client.close();
      fault = 'none';
      server = await startProcess(storage, port);
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
      server = await startProcess(storage, port);
      await client.sync();
      assert.equal(client.pendingChanges, 0);

      const all: { record_uuid: string; record_version: number }[] = [];
      for (let since = 0; ;) {
        const r = await call(url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id }, json: { since_version: since, limit: 1000 } });
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
