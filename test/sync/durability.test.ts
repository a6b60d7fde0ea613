import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { change, device } from './push-client.js';
import { nodeEntry } from '../helpers/node-entry.js';

interface Server { url: string; child: ChildProcess }

/** Starts the real service process (the CLI) on an ephemeral port and waits for its "listening" log line. */
async function startProcess(storage: TestStorage): Promise<Server> {
  const args = [...nodeEntry('src/sync/cli.ts'), 'serve', '--port', '0', '--data-dir', storage.dataDir, '--scrypt-log2n', '10'];
  if (storage.databaseUrl) args.push('--database-url', storage.databaseUrl, '--db-schema', storage.pgSchema);
  const child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } });
  let out = '';
  let err = '';
  child.stderr!.on('data', (c: Buffer) => { err += String(c); });
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += String(c);
      const m = /"address":"(http:\/\/[^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before listening:\n${err}${out}`)));
  });
  return { url, child };
}

async function kill(server: Server): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  const exited = once(server.child, 'exit');
  server.child.kill('SIGKILL');
  await exited;
}

// Each backend restarts the real process four times; the backends run side by side to halve the wall time.
describe('sync durability', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: an answered push, resolve and upload survive SIGKILL right after the answer`, async (t) => {
      const storage = await freshStorage(backend);
      const started: Server[] = [];
      // Hooks run in the order registered: the processes stop before their schema is dropped.
      t.after(async () => { await Promise.all(started.map(kill)); await storage.cleanup(); });
      const start = async (): Promise<Server> => { const s = await startProcess(storage); started.push(s); return s; };
      let server = await start();

      const u = await newUser(server);
      const b = await newBusiness(server, u);
      const rec = randomUUID();
      const h = { 'x-business-id': b.id };

      const pushed = await device(server.url, u.token, b.id, 'dev-a').push({ changes: [change(rec, 1, { name: 'kept' })] });
      assert.equal(pushed.status, 200);
      const conflicted = await device(server.url, u.token, b.id, 'dev-b').push({ changes: [change(rec, 1, { name: 'mine' })] });
      await kill(server);

      server = await start();
      const pulled = await device(server.url, u.token, b.id).pullAll(0);
      assert.deepEqual(pulled.changes.map((c) => c.data), [{ name: 'kept' }]);
      const conflictId = conflicted.body.conflicts[0].id as number;
      const resolved = await call(server.url, 'POST', `/api/sync/conflicts/${conflictId}/resolve`, { token: u.token, headers: h, json: { resolution: 'local' } });
      assert.equal(resolved.status, 200);
      await kill(server);

      server = await start();
      const after = await device(server.url, u.token, b.id).pullAll(0);
      assert.deepEqual(after.changes.map((c) => [c.version, c.data]), [[1, { name: 'kept' }], [2, { name: 'mine' }]]);
      const bytes = randomBytes(200_000);
      const form = new FormData();
      form.append('record_type', 'invoice');
      form.append('record_uuid', rec);
      form.append('file', new Blob([bytes]), 'scan.png');
      const uploaded = await call(server.url, 'POST', '/api/sync/attachment', { token: u.token, headers: h, body: form });
      assert.equal(uploaded.status, 201);
      await kill(server);

      server = await start();
      const status = await call(server.url, 'GET', '/api/sync/status', { token: u.token, headers: h });
      assert.deepEqual(status.body, { business_id: b.id, server_version: 2, pending_conflicts: 0 });
      const d = await fetch(`${server.url}/api/sync/attachment/${uploaded.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } });
      assert.equal(d.status, 200);
      const got = Buffer.from(await d.arrayBuffer());
      assert.equal(createHash('sha256').update(got).digest('hex'), uploaded.body.sha256);
      assert.ok(got.equals(bytes));
      await kill(server);
    });
  }
});
