// Why: a client keeps its outbox numbering, conflicts and session in memory, so two clients of one store (two tabs,
// two processes) overwrote each other's queued changes; one client per store is now enforced, and these try to break it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createMemoryStore, SyncClient, SyncClientError, type LocalStore } from '../../src/client/index.js';
import { createSqliteStore } from '../../src/client/sqlite.js';

const inUse = (e: unknown) => e instanceof SyncClientError && e.code === 'store_in_use';
// No server is reached: opening a client reads only its store.
const open = (store: LocalStore) => SyncClient.open({ baseUrl: 'http://127.0.0.1:9', store });

test('a second client of one memory store is refused until the first closes; the data is kept', async () => {
  const store = createMemoryStore();
  const first = await open(store);
  await first.put('notes', randomUUID(), { text: 'queued' });
  await assert.rejects(open(store), inUse);
  assert.equal(first.pendingChanges, 1, 'the refused open changed nothing of the first client');
  await first.close();
  const next = await open(store);
  assert.equal(next.pendingChanges, 1);
  await first.close();
  await assert.rejects(open(store), inUse, 'closing the first client again does not give up the claim its successor holds');
  await next.close();
});

test('a SQLite store is held by one connection: another in this process or in another process is refused, the same file opens after close', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'client-owner-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'device.sqlite');
  const store = createSqliteStore(file);
  const first = await open(store);
  await first.put('notes', randomUUID(), { text: 'queued' });
  assert.throws(() => createSqliteStore(file), inUse);
  await assert.rejects(open(store), inUse, 'a second client of the same store object');
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `
    import { createSqliteStore } from './src/client/sqlite.js';
    try { createSqliteStore(${JSON.stringify(file)}); console.log('opened'); } catch (e) { console.log(e.code); }`], { encoding: 'utf8' });
  assert.equal(child.stdout.trim(), 'store_in_use', child.stderr);
  await first.close();
  const next = await open(createSqliteStore(file));
  assert.equal(next.pendingChanges, 1, 'the queued change survived');
  await next.close();
});

test('an open that fails after claiming the store gives the claim back', async () => {
  const store = createMemoryStore();
  const failing: LocalStore = { ...store, get: () => Promise.reject(new Error('disk gone')) };
  await assert.rejects(open(failing), /disk gone/);
  const client = await open(store);
  await client.close();
});
