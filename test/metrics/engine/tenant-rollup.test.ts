import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendBatch, newWriterState } from '../../../src/metrics/storage/engine/head-writer.js';
import { SealedTimestamps } from '../../../src/metrics/storage/engine/sealed-timestamps.js';
import { findSealable, sealWindow } from '../../../src/metrics/storage/engine/sealer.js';
import { rollTenantWindows } from '../../../src/metrics/storage/engine/tenant-rollup.js';
import { BACKENDS } from '../../helpers/backends.js';
import { useEngineDatabase } from '../../helpers/metrics.js';

/** The writer's chain of work gets one turn per tenant window rolled up, so appends can commit between two of them. */
for (const backend of BACKENDS) {
  describe(`tenant rollups on ${backend}`, () => {
    const db = useEngineDatabase(backend);

    test('each due window is its own turn of the caller\'s chain, and an append in between commits before the next window is rolled up', async () => {
      const deps = { conn: db.conn, state: newWriterState(), limits: { perHost: 100, perTenant: 100, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => 0, now: () => 0 };
      const tenants = ['t-a', 't-b', 't-c'];
      for (const t of tenants) await db.conn.run('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)', [t, t]);
      const report = (tenantId: string, ts: number) => ({ tenantId, hostId: 'h', hostname: 'h', platform: 'linux', ts, names: ['cpu.usage'], values: [ts / 10_000] });
      assert.ok((await appendBatch(deps, tenants.flatMap((t) => [report(t, 0), report(t, 10_000)]))).every((o) => o.status === 'stored'));
      for (const c of findSealable(deps.state.headWindows, { graceMs: 0, idleMs: 0 }, 10 * 3_600_000, 0, deps.state, true)) {
        assert.equal(await sealWindow(db.conn, c, 0), true);
      }

      const steps: string[] = [];
      const rolled = async () => Number((await db.conn.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM tenant_windows WHERE rolled_version = version'))[0]!.n);
      let turns = 0;
      const done = await rollTenantWindows(db.conn, 1_000, 0, 10, async (fn) => {
        const out = await fn();
        turns++;
        steps.push(`turn ${turns}: ${await rolled()} rolled`);
        // What the writer's chain would run between two turns: an append that commits on its own.
        if (turns === 2) {
          assert.ok((await appendBatch(deps, [report('t-a', 20 * 3_600_000)])).every((o) => o.status === 'stored'));
          steps.push('append committed');
        }
        return out;
      });
      assert.equal(done, 3);
      assert.deepEqual(steps, ['turn 1: 0 rolled', 'turn 2: 1 rolled', 'append committed', 'turn 3: 2 rolled', 'turn 4: 3 rolled']);
    });
  });
}
