import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { runExpiryCleanup } from '../../src/core/storage/expiry-cleanup.js';
import { DASHBOARD_SESSION_EXPIRY } from '../../src/metrics/dashboard/session-cleanup.js';
import { createSessionStore, type DashboardSessionTables } from '../../src/metrics/dashboard/session-store.js';
import { BACKENDS } from '../helpers/backends.js';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';

for (const backend of BACKENDS) {
  describe(`dashboard session cleanup on ${backend}`, () => {
    let m: MetricsHarness;
    before(async () => { m = await startMetrics(backend); });
    after(() => m.close());

    test('expired sessions are removed in bounded batches without anyone signing in; live ones stay', async () => {
      const sessions = createSessionStore(m.deps.database.db.withTables<DashboardSessionTables>());
      const now = Date.now();
      const make = async (expiresAt: number) => {
        const idHash = randomBytes(32).toString('hex');
        await sessions.insert({ idHash, tokenHash: 'h', createdAt: 0, expiresAt });
        return idHash;
      };
      const expired = [await make(now), await make(now - 1), await make(now - 86_400_000)];
      const live = await make(now + 60_000);
      const first = await runExpiryCleanup(m.deps.database, [DASHBOARD_SESSION_EXPIRY], now, { batchSize: 2, maxBatches: 1 });
      assert.deepEqual(first, { dashboard_sessions: 2 });
      assert.deepEqual(await runExpiryCleanup(m.deps.database, [DASHBOARD_SESSION_EXPIRY], now), { dashboard_sessions: 1 });
      for (const id of expired) assert.equal(await sessions.find(id), undefined);
      assert.ok(await sessions.find(live));
    });
  });
}
