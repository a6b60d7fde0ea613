import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import { AppError } from '../../src/core/errors.js';
import { openDatabase } from '../../src/core/storage/database.js';
import { syncMigrations } from '../../src/sync/storage/migrations/index.js';
import type { SyncTables } from '../../src/sync/deps.js';
import { createKyselyChangeStore } from '../../src/sync/changes/kysely-change-store.js';
import { spawnPushWorker, startPushThread } from '../../src/sync/changes/push-thread-client.js';
import { validatePushItems } from '../../src/sync/changes/push-validation.js';
import { freshStorage } from '../helpers/backends.js';

const items = (n: number) => validatePushItems(Array.from({ length: n }, () => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { a: 1 } })), []).items;

test('SQLite pushes commit on the push thread, readable on the service connection; a thread that died is replaced by the next push', async (t) => {
  const s = await freshStorage('sqlite');
  t.after(() => s.cleanup());
  const database = await openDatabase<SyncTables>({ databaseUrl: undefined, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db', migrations: syncMigrations });
  t.after(() => database.close());
  const workers: Worker[] = [];
  const thread = await startPushThread(path.join(s.dataDir, 'sync.db'), (data) => {
    const w = spawnPushWorker(data);
    workers.push(w);
    return w;
  });
  const store = createKyselyChangeStore(database.db, database.dialect, { pushThread: thread });
  t.after(() => store.close());
  const business = randomUUID();

  const first = await Promise.all([1, 2, 3].map(() => store.applyPush(business, { userId: null, instanceId: 'd', branch: 'main', items: items(4) }, Date.now())));
  assert.deepEqual(first.map((r) => r.serverVersion).sort((a, b) => a - b), [4, 8, 12]);
  assert.equal(workers.length, 1);

  await workers[0]!.terminate();
  const after = await store.applyPush(business, { userId: null, instanceId: 'd', branch: 'main', items: items(2) }, Date.now());
  assert.equal(after.serverVersion, 14, 'the counter continues where the first thread left it');
  assert.equal(workers.length, 2, 'a new thread took over');
  const page = await store.pull(business, 0, 100);
  assert.deepEqual(page.changes.map((c) => c.version), Array.from({ length: 14 }, (_, i) => i + 1));

  await store.close();
  await assert.rejects(store.applyPush(business, { userId: null, instanceId: 'd', branch: 'main', items: items(1) }, Date.now()),
    (e: unknown) => e instanceof AppError && e.code === 'unavailable' && /shutting down/.test(String(e.details)) && e.extra?.['retry_after'] === 2);
});
