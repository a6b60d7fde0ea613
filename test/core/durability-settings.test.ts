import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type pg from 'pg';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { newBusiness, newUser, startSync } from '../helpers/sync.js';
import { startMetrics } from '../helpers/metrics.js';
import { change, device } from '../sync/push-client.js';

/**
 * The crash tests kill with SIGKILL, which the page cache survives, so they
 * cannot notice a weakened fsync setting. These read the settings the running
 * services actually use, on their live connections, after a write went through.
 * (The metrics engine's SQLite writer thread opens its own connection, which
 * these cannot reach: only WAL, a property of the file, is visible from here.)
 */

/** synchronous_commit on every connection of the pool (all checked out at once, so none is missed). */
async function synchronousCommit(pool: pg.Pool, size: number): Promise<string[]> {
  const clients = await Promise.all(Array.from({ length: size }, () => pool.connect()));
  try {
    return await Promise.all(clients.map(async (c) => (await c.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit));
  } finally {
    for (const c of clients) c.release();
  }
}

/** Levels that wait for the local WAL flush (or more) before a commit returns. */
const DURABLE_COMMIT = ['on', 'remote_write', 'remote_apply'];

for (const backend of BACKENDS) {
  describe(`durability settings in force on ${backend}`, () => {
    test('the sync service commits durably: SQLite WAL with synchronous=FULL, PostgreSQL synchronous_commit on', async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      assert.equal((await device(s.url, u.token, b.id).push({ changes: [change(randomUUID(), 1)] })).status, 200);
      const { sqlite, pgPool } = s.deps.database;
      if (backend === 'sqlite') {
        assert.equal(sqlite!.pragma('journal_mode', { simple: true }), 'wal');
        assert.equal(sqlite!.pragma('synchronous', { simple: true }), 2, 'synchronous=FULL (2)');
      } else {
        for (const level of await synchronousCommit(pgPool!, pgPool!.options.max ?? 10)) assert.ok(DURABLE_COMMIT.includes(level), level);
      }
    });

    test('the metrics service commits durably: SQLite WAL with synchronous=FULL, PostgreSQL synchronous_commit on', async (t) => {
      const m = await startMetrics(backend);
      t.after(() => m.close());
      await m.newTenant();
      const { sqlite, pgPool } = m.deps.database;
      if (backend === 'sqlite') {
        assert.equal(sqlite!.pragma('journal_mode', { simple: true }), 'wal');
        assert.equal(sqlite!.pragma('synchronous', { simple: true }), 2, 'synchronous=FULL (2)');
      } else {
        for (const level of await synchronousCommit(pgPool!, pgPool!.options.max ?? 10)) assert.ok(DURABLE_COMMIT.includes(level), level);
      }
    });
  });
}
