import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { runExpiryCleanup } from '../../src/core/storage/expiry-cleanup.js';
import { DASHBOARD_SESSION_EXPIRY } from '../../src/metrics/dashboard/session-cleanup.js';
import { createSessionStore, type DashboardSessionTables } from '../../src/metrics/dashboard/session-store.js';
import { issueToken } from '../../src/metrics/domain/tenant-tokens.js';
import { BACKENDS } from '../helpers/backends.js';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';

/** Inserts a session row expiring at `expiresAt`; returns its id hash. */
async function plant(m: MetricsHarness, expiresAt: number): Promise<string> {
  const idHash = randomBytes(32).toString('hex');
  await createSessionStore(m.deps.database.db.withTables<DashboardSessionTables>()).insert({ idHash, tokenHash: 'h', createdAt: 0, expiresAt });
  return idHash;
}

const stored = (m: MetricsHarness, idHash: string) => createSessionStore(m.deps.database.db.withTables<DashboardSessionTables>()).find(idHash);

for (const backend of BACKENDS) {
  describe(`dashboard session cleanup on ${backend}`, () => {
    let m: MetricsHarness;
    // The default interval (10 minutes, first run after 5 at the earliest): no scheduled run happens during these tests.
    before(async () => { m = await startMetrics(backend); });
    after(() => m.close());

    test('expired sessions are removed in bounded batches without anyone signing in; live ones stay', async () => {
      const now = Date.now();
      const expired = [await plant(m, now), await plant(m, now - 1), await plant(m, now - 86_400_000)];
      const live = await plant(m, now + 60_000);
      const first = await runExpiryCleanup(m.deps.database, [DASHBOARD_SESSION_EXPIRY], now, { batchSize: 2, maxBatches: 1 });
      assert.deepEqual(first, { dashboard_sessions: 2 });
      assert.deepEqual(await runExpiryCleanup(m.deps.database, [DASHBOARD_SESSION_EXPIRY], now), { dashboard_sessions: 1 });
      for (const id of expired) assert.equal(await stored(m, id), undefined);
      assert.ok(await stored(m, live));
    });

    test('a sign-in sweeps nothing: expired sessions are left to the background cleanup', async () => {
      const expired = await plant(m, Date.now() - 1);
      const { token } = await issueToken(m.deps.store, 'acme');
      const r = await fetch(`${m.url}/signin`, {
        method: 'POST', redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: m.url },
        body: new URLSearchParams({ token }).toString(),
      });
      assert.equal(r.status, 303);
      assert.ok(await stored(m, expired), 'the sign-in left the expired session alone');
      await runExpiryCleanup(m.deps.database, [DASHBOARD_SESSION_EXPIRY], Date.now());
      assert.equal(await stored(m, expired), undefined);
    });

    test('the running service removes expired sessions on its own, every --session-cleanup-ms on average', async (t) => {
      const own = await startMetrics(backend, { sessionCleanupMs: 1_000 });
      t.after(() => own.close());
      const expired = await plant(own, Date.now() - 1);
      const live = await plant(own, Date.now() + 3_600_000);
      // The first run comes 0.5 to 1.5 s after start; 10 s is a liveness bound, not a speed one.
      for (let i = 0; i < 1000 && await stored(own, expired); i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(await stored(own, expired), undefined, 'the cleanup ran');
      assert.ok(await stored(own, live));
    });
  });
}
