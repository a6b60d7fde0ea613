import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { deleteBefore } from '../../../src/metrics/storage/engine/engine-writer.js';
import { appendBatch, newWriterState, type WriterState } from '../../../src/metrics/storage/engine/head-writer.js';
import { SealedTimestamps } from '../../../src/metrics/storage/engine/sealed-timestamps.js';
import { BACKENDS } from '../../helpers/backends.js';
import { useEngineDatabase } from '../../helpers/metrics.js';

/**
 * The writer's per-host caches (head-writer.ts, WriterState) hold only hosts the
 * database still has: a fleet whose hosts come and go must not grow the writer's
 * memory with every host it ever saw.
 */
for (const backend of BACKENDS) {
  describe(`writer caches on ${backend}`, () => {
    const db = useEngineDatabase(backend);
    const HOUR = 3_600_000;

    const cachedKeys = (state: WriterState) => ({
      hosts: [...state.hosts.values()].map((h) => h.key).sort(),
      hostMetricIds: [...state.hostMetricIds.keys()].sort(),
      lastAppend: [...state.lastAppend.keys()].sort(),
      appendGap: [...state.appendGap.keys()].sort(),
    });

    test('a retention sweep forgets the hosts it removed, and those another instance\'s sweep removed; the kept host stays cached', async () => {
      const tenantId = 't-caches';
      await db.conn.run('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)', [tenantId, tenantId]);
      let wall = 0;
      // Two instances' writers: each has its own caches.
      const writer = () => ({ conn: db.conn, state: newWriterState(), limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => (wall += 1000), now: () => 100 * HOUR });
      const a = writer();
      const b = writer();
      const reports = (hostIds: string[], ts: number) => hostIds.map((hostId) => ({ tenantId, hostId, hostname: hostId, platform: 'linux', ts, names: ['cpu.usage'], values: [1] }));
      const gone = ['vm-1', 'vm-2', 'vm-3'];
      for (const deps of [a, b]) {
        for (const ts of [HOUR, HOUR + 10_000]) assert.ok((await appendBatch(deps, reports([...gone, 'keep'], ts + (deps === b ? 1 : 0)))).every((o) => o.status === 'stored'));
        assert.ok((await appendBatch(deps, reports(['keep'], 50 * HOUR + (deps === b ? 1 : 0)))).every((o) => o.status === 'stored'));
      }
      const [{ key: keep }] = await db.conn.all<{ key: number }>('SELECT key FROM hosts WHERE host_id = ?', ['keep']) as [{ key: number }];
      assert.equal(cachedKeys(a.state).lastAppend.length, 4);
      assert.equal(cachedKeys(b.state).hosts.length, 4);

      assert.deepEqual(await deleteBefore(db.conn, a.state, 10 * HOUR), { reports: 16, hosts: 3 });
      const onlyKeep = { hosts: [keep], hostMetricIds: [keep], lastAppend: [keep], appendGap: [keep] };
      assert.deepEqual(cachedKeys(a.state), onlyKeep, 'the sweeping instance');
      // The other instance's sweep finds nothing left to delete, and forgets what the first one removed.
      assert.deepEqual(await deleteBefore(db.conn, b.state, 10 * HOUR), { reports: 0, hosts: 0 });
      assert.deepEqual(cachedKeys(b.state), onlyKeep, 'the other instance');

      // A removed host that reports again is created again.
      assert.deepEqual(await appendBatch(a, reports(['vm-1'], 60 * HOUR)), [{ status: 'stored' }]);
      assert.deepEqual(await appendBatch(b, reports(['vm-1'], 60 * HOUR + 1)), [{ status: 'stored' }]);
    });
  });
}
