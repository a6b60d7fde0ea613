import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import { appendBatch, newWriterState } from '../../../src/metrics/storage/engine/head-writer.js';
import { SealedTimestamps } from '../../../src/metrics/storage/engine/sealed-timestamps.js';
import { sealWindow, sealWindows } from '../../../src/metrics/storage/engine/sealer.js';
import { databaseConn, pgConn, type SqlConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import { deleteBefore } from '../../../src/metrics/storage/engine/engine-writer.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { openTestMetricsDatabase } from '../../helpers/metrics.js';

/**
 * PostgreSQL only (on SQLite a seal and a sweep never overlap: one writer):
 * a retention sweep on another connection deletes the head rows a seal has
 * just read. The seal must undo itself rather than write them back as a block.
 */
for (const backend of BACKENDS.filter((b) => b === 'postgres')) {
  describe(`a seal racing a retention sweep on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let conn: SqlConn;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      conn = pgConn(database.pgPool!);
    });
    after(async () => {
      await database.close();
      await storage.cleanup();
    });

    /** `conn` whose transactions run `sweep` (on its own connection, committed) right after a seal reads a host's head rows. */
    const sweepAfterHeadRead = (sweep: (hostKey: number) => Promise<unknown> | undefined): SqlConn => ({
      ...conn,
      transaction: (fn, opts) => conn.transaction((tx) => fn({
        ...tx,
        all: async <T>(text: string, params?: readonly unknown[]) => {
          const rows = await tx.all<T>(text, params);
          if (text.startsWith('SELECT ts, samples FROM reports')) await sweep(Number(params?.[0]));
          return rows;
        },
      }), opts),
    });

    test('the head rows a seal read are swept before it deletes them: no block is written, the seal reports nothing done', async () => {
      await conn.run(`INSERT INTO tenants (id, name, created_at) VALUES ('t-race', 't-race', 0)`);
      const deps = { conn, state: newWriterState(), limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => 0, now: () => 0 };
      const reports = Array.from({ length: 5 }, (_, i) => ({ tenantId: 't-race', hostId: 'h', hostname: 'h', platform: 'linux', ts: i * 10_000, names: ['cpu.usage'], values: [i] }));
      assert.ok((await appendBatch(deps, reports)).every((o) => o.status === 'stored'));
      const key = (await conn.all<{ key: number }>('SELECT key FROM hosts'))[0]!.key;
      const sweeping = sweepAfterHeadRead(() => database.pgPool!.query('DELETE FROM reports WHERE ts < 1000000'));
      assert.equal(await sealWindow(sweeping, { hostKey: key, windowStart: 0 }, 0), false);
      assert.deepEqual(await conn.all('SELECT window_start FROM blocks'), [], 'the swept reports were not written back as a block');
      assert.deepEqual(await conn.all('SELECT window_start FROM tenant_windows'), []);
    });

    test('in a group sealed in one transaction, the window whose rows were swept is undone alone: the others are sealed', async () => {
      await conn.run(`INSERT INTO tenants (id, name, created_at) VALUES ('t-group', 't-group', 0)`);
      const deps = { conn, state: newWriterState(), limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => 0, now: () => 0 };
      const hour = 3_600_000;
      const reports = ['g1', 'g2', 'g3'].flatMap((hostId) => Array.from({ length: 3 }, (_, i) => ({ tenantId: 't-group', hostId, hostname: hostId, platform: 'linux', ts: 10 * hour + i * 10_000, names: ['cpu.usage'], values: [i] })));
      assert.ok((await appendBatch(deps, reports)).every((o) => o.status === 'stored'));
      const keys = new Map((await conn.all<{ key: number; host_id: string }>(`SELECT key, host_id FROM hosts WHERE tenant_id = 't-group'`)).map((r) => [r.host_id, Number(r.key)]));
      const raced = keys.get('g2')!;
      // The sweep deletes g2's rows only.
      const sweeping = sweepAfterHeadRead((hostKey) => hostKey === raced ? database.pgPool!.query('DELETE FROM reports WHERE host_key = $1', [raced]) : undefined);
      const items = ['g1', 'g2', 'g3'].map((h) => ({ c: { hostKey: keys.get(h)!, windowStart: 10 * hour }, prepared: undefined }));
      assert.deepEqual(await sealWindows(sweeping, items, 0), [true, false, true]);
      const sealed = await conn.all<{ host_key: number; rows: number }>(`SELECT host_key, rows FROM blocks WHERE host_key = ANY(?) ORDER BY host_key`, [[...keys.values()]]);
      assert.deepEqual(sealed.map((r) => [Number(r.host_key), r.rows]), [[keys.get('g1')!, 3], [keys.get('g3')!, 3]], 'no block for the swept window');
      assert.deepEqual((await conn.all<{ n: string }>('SELECT count(*) AS n FROM reports WHERE host_key = ANY(?)', [[...keys.values()]])).map((r) => Number(r.n)), [0]);
    });
  });
}

describe('a retention sweep PostgreSQL undoes to break a deadlock', () => {
  test('runs again, as appends do; another failure is thrown at once', async () => {
    const storage = await freshStorage('sqlite');
    const database = await openTestMetricsDatabase(storage);
    try {
      const real = databaseConn(database);
      const failing = (errors: unknown[]) => {
        let calls = 0;
        const conn: SqlConn = { ...real, transaction: (fn, opts) => { calls++; const e = errors.shift(); return e ? Promise.reject(e) : real.transaction(fn, opts); } };
        return { conn, calls: () => calls };
      };
      const deadlocked = failing([Object.assign(new Error('deadlock detected'), { code: '40P01' }), Object.assign(new Error('could not serialize'), { code: '40001' })]);
      assert.deepEqual(await deleteBefore(deadlocked.conn, newWriterState(), Date.now()), { reports: 0, hosts: 0 });
      assert.equal(deadlocked.calls(), 3);
      const broken = failing([Object.assign(new Error('disk full'), { code: 'SQLITE_FULL' })]);
      await assert.rejects(deleteBefore(broken.conn, newWriterState(), Date.now()), /disk full/);
      assert.equal(broken.calls(), 1);
    } finally {
      await database.close();
      await storage.cleanup();
    }
  });
});
