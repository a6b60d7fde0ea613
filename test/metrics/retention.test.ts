import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startRetentionSweep, sweepExpired, type RetentionStores } from '../../src/metrics/domain/retention.js';

/** The sweep's own logic over stand-in stores (the stores' deletes are tested against both databases in store tests). */
const DAY = 86_400_000;

test('one cutoff (now minus the retention) for reports and incidents, and their counts in one result', async () => {
  const cutoffs: number[] = [];
  const stores: RetentionStores = {
    store: { deleteBefore: async (cutoff) => { cutoffs.push(cutoff); return { reports: 7, hosts: 2 }; } },
    alerts: { deleteEndedBefore: async (cutoff) => { cutoffs.push(cutoff); return 3; } },
  };
  assert.deepEqual(await sweepExpired(stores, 30 * DAY, 100 * DAY), { reports: 7, hosts: 2, incidents: 3 });
  assert.deepEqual(cutoffs, [70 * DAY, 70 * DAY]);
});

test('a sweep whose incident delete fails reports the error, not a partial count; the next sweep runs', async () => {
  let calls = 0;
  const stores: RetentionStores = {
    store: { deleteBefore: async () => ({ reports: 1, hosts: 0 }) },
    alerts: { deleteEndedBefore: async () => { if (++calls === 1) throw new Error('database is locked'); return 0; } },
  };
  const results: unknown[] = [];
  // The sweep's timer is unref'd (it never keeps the service alive); this deadline keeps the test's process alive until the second sweep.
  const stop = await new Promise<() => Promise<void>>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error('no second sweep within 5 s')), 5_000);
    const s = startRetentionSweep(stores, {
      retentionMs: DAY, intervalMs: 20, now: () => 10 * DAY,
      onSweep: (r) => { results.push(r); if (results.length === 2) { clearTimeout(deadline); resolve(s); } },
    });
  });
  await stop();
  assert.match(String((results[0] as { error: Error }).error.message), /database is locked/);
  assert.deepEqual(results[1], { reports: 1, hosts: 0, incidents: 0 });
});
