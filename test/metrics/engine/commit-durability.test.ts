import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendBatch, newWriterState } from '../../../src/metrics/storage/engine/head-writer.js';
import { SealedTimestamps } from '../../../src/metrics/storage/engine/sealed-timestamps.js';
import { findSealable, sealWindow } from '../../../src/metrics/storage/engine/sealer.js';
import { type SqlConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import { rollTenantWindows } from '../../../src/metrics/storage/engine/tenant-rollup.js';
import { BACKENDS } from '../../helpers/backends.js';
import { useEngineDatabase } from '../../helpers/metrics.js';

/**
 * Appends must commit durably; seals and rollups may commit without waiting
 * for the disk (they move or derive data already durable). This reads the
 * setting in force inside each of the engine's own transactions, so a relaxed
 * append, or a relaxed setting left behind on the connection, fails here.
 */
for (const backend of BACKENDS) {
  describe(`commit durability of the engine's transactions on ${backend}`, () => {
    const db = useEngineDatabase(backend);
    before(() => { if (db.database.sqlite) db.database.sqlite.pragma('synchronous = FULL'); });

    /** The durability level in force at each statement of every transaction `base` runs, by kind of transaction. */
    function recording(base: SqlConn, seen: Array<{ relaxed: boolean; level: string }>): SqlConn {
      const level = async (c: SqlConn) => backend === 'sqlite'
        ? String((await c.all<{ synchronous: number }>('PRAGMA synchronous'))[0]!.synchronous)
        : (await c.all<{ synchronous_commit: string }>('SHOW synchronous_commit'))[0]!.synchronous_commit;
      return {
        ...base,
        transaction: (fn, opts) => base.transaction(async (tx) => {
          seen.push({ relaxed: opts?.relaxed === true, level: await level(tx) });
          return fn(tx);
        }, opts),
      };
    }
    const FULL = backend === 'sqlite' ? '2' : 'on';
    const RELAXED = backend === 'sqlite' ? '1' : 'off';

    test('appends commit durably; seals and rollups relaxed; the connection is durable again after them, even after a failure', async () => {
      const seen: Array<{ relaxed: boolean; level: string }> = [];
      const c = recording(db.conn, seen);
      await db.conn.run(`INSERT INTO tenants (id, name, created_at) VALUES ('t-dur', 't-dur', 0)`);
      const deps = { conn: c, state: newWriterState(), limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => 0, now: () => 0 };
      const reports = Array.from({ length: 5 }, (_, i) => ({ tenantId: 't-dur', hostId: 'h', hostname: 'h', platform: 'linux', ts: i * 10_000, names: ['cpu.usage'], values: [i] }));
      assert.ok((await appendBatch(deps, reports)).every((o) => o.status === 'stored'));
      const due = findSealable(deps.state.headWindows, { graceMs: 0, idleMs: 0 }, 10 * 3_600_000, 0, deps.state, true);
      assert.equal(due.length, 1);
      assert.equal(await sealWindow(c, due[0]!, 0), true);
      assert.equal(await rollTenantWindows(c, 1_000, 0, 10, (fn) => fn()), 1);
      await assert.rejects(c.transaction(() => Promise.reject(new Error('boom')), { relaxed: true }), /boom/);
      assert.ok((await appendBatch(deps, [{ ...reports[0]!, ts: 50 * 3_600_000 }])).every((o) => o.status === 'stored'));
      // An append whose caller makes the log durable itself (the SQLite writer's WAL fsync, wal-sync.test.ts) is relaxed.
      assert.ok((await appendBatch({ ...deps, syncedByCaller: true }, [{ ...reports[0]!, ts: 60 * 3_600_000 }])).every((o) => o.status === 'stored'));
      assert.deepEqual(seen.map((s) => [s.relaxed, s.level]), [
        [false, FULL], // append
        [true, RELAXED], // seal
        [true, RELAXED], // rollup
        [true, RELAXED], // the failed one
        [false, FULL], // append after them: nothing relaxed was left behind
        [true, RELAXED], // append synced by its caller
      ]);
    });
  });
}
