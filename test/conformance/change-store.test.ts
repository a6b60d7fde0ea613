import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AppError } from '../../src/core/errors.js';
import { validatePushItems } from '../../src/sync/changes/push-validation.js';
import type { SyncDeps } from '../../src/sync/deps.js';
import { SYNC_STORE_FACTORIES } from './sync-stores.js';

/** The ChangeStore contract (src/sync/changes/change-store.ts) on every implementation. */
const item = (recordUuid: string, version: number, data: Record<string, unknown> = { v: version }) =>
  ({ table_name: 'customers', record_uuid: recordUuid, version, operation: version === 1 ? 'create' : 'update', data });
const push = (instanceId: string, ...changes: ReturnType<typeof item>[]) => ({ userId: null, instanceId, branch: 'main', items: validatePushItems(changes, []).items });

for (const f of SYNC_STORE_FACTORIES) {
  describe(`ChangeStore conformance: ${f.name}`, () => {
    let deps: SyncDeps;
    before(async () => { deps = await f.open(); });
    after(() => deps.close());
    const store = () => deps.changes;

    test('each business counts its own server versions from 1, without gaps; pull pages through them in order', async () => {
      const a = randomUUID();
      const b = randomUUID();
      const r1 = await store().applyPush(a, push('d', item(randomUUID(), 1), item(randomUUID(), 1), item(randomUUID(), 1)), 1000);
      assert.deepEqual([r1.accepted, r1.serverVersion, r1.applied.map((c) => c.version)], [3, 3, [1, 2, 3]]);
      assert.equal((await store().applyPush(b, push('d', item(randomUUID(), 1)), 1000)).serverVersion, 1);
      const p1 = await store().pull(a, 0, 2);
      assert.deepEqual([p1.changes.map((c) => c.version), p1.hasMore, p1.version], [[1, 2], true, 2]);
      const p2 = await store().pull(a, 2, 2);
      assert.deepEqual([p2.changes.map((c) => c.version), p2.hasMore, p2.version], [[3], false, 3]);
      const p3 = await store().pull(a, 3, 2);
      assert.deepEqual([p3.changes, p3.hasMore, p3.version], [[], false, 3]);
      assert.deepEqual(await store().status(randomUUID()), { serverVersion: 0, pendingConflicts: 0 });
    });

    test('a page of more than one part (1000 rows a statement) holds exactly its changes, and a page ends once its data reach maxBytes (at least one change)', async () => {
      const biz = randomUUID();
      const pad = 'x'.repeat(100);
      for (const n of [1000, 1000, 500]) {
        await store().applyPush(biz, push('d', ...Array.from({ length: n }, () => item(randomUUID(), 1, { pad }))), 1000);
      }
      const versions = (p: { changes: { version: number }[] }) => p.changes.map((c) => c.version);
      const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
      const all = await store().pull(biz, 0, 10_000);
      assert.deepEqual([versions(all), all.hasMore, all.version], [range(1, 2500), false, 2500]);
      for (const [since, limit, last] of [[0, 1000, 1000], [0, 1001, 1001], [0, 2000, 2000], [1000, 1000, 2000], [999, 1502, 2500]] as const) {
        const p = await store().pull(biz, since, limit);
        assert.deepEqual([versions(p), p.hasMore, p.version], [range(since + 1, last), last < 2500, last], `pull(${since}, ${limit})`);
      }
      const size = all.changes[0]!.data!.length;
      for (const [since, maxBytes, last] of [[0, 0, 1], [0, 1, 1], [0, 3 * size, 3], [0, 3 * size + 1, 4], [0, 1500 * size, 1500], [2499, 1, 2500]] as const) {
        const p = await store().pull(biz, since, 10_000, maxBytes);
        assert.deepEqual([versions(p), p.hasMore, p.version], [range(since + 1, last), last < 2500, last], `pull(${since}, maxBytes ${maxBytes})`);
      }
    });

    test('concurrent pushes to one business get distinct, gap-free versions', async () => {
      const biz = randomUUID();
      await Promise.all(Array.from({ length: 8 }, (_, i) => store().applyPush(biz, push(`d${i}`, item(randomUUID(), 1), item(randomUUID(), 1)), 1000)));
      const page = await store().pull(biz, 0, 100);
      assert.deepEqual(page.changes.map((c) => c.version), Array.from({ length: 16 }, (_, i) => i + 1));
    });

    test('the version rule: a retry is accepted once, an older version from the same instance is stale, from another instance a conflict', async () => {
      const biz = randomUUID();
      const rec = randomUUID();
      await store().applyPush(biz, push('d1', item(rec, 1), item(rec, 2)), 1000);
      const retry = await store().applyPush(biz, push('d1', item(rec, 2)), 1000);
      assert.deepEqual([retry.accepted, retry.applied.length, retry.serverVersion], [1, 0, 2]);
      const stale = await store().applyPush(biz, push('d1', item(rec, 1, { other: true })), 1000);
      assert.equal(stale.rejections.length, 1);
      const conflict = await store().applyPush(biz, push('d2', item(rec, 2, { mine: true })), 1000);
      assert.deepEqual([conflict.accepted, conflict.applied.length, conflict.conflicts.length], [0, 0, 1]);
      assert.equal(conflict.conflicts[0]!.resolution, 'pending');
      const again = await store().applyPush(biz, push('d2', item(rec, 2, { mine: true })), 1000);
      assert.equal(again.conflicts[0]!.id, conflict.conflicts[0]!.id, 'a retried push returns the same conflict');
      assert.deepEqual(await store().status(biz), { serverVersion: 2, pendingConflicts: 1 });
    });

    test('a retry is recognised however many changes of the record came after it, from this device or others', async () => {
      const biz = randomUUID();
      const rec = randomUUID();
      await store().applyPush(biz, push('d1', item(rec, 1), item(rec, 2)), 1000);
      await store().applyPush(biz, push('d2', item(rec, 3)), 1000);
      await store().applyPush(biz, push('d3', item(rec, 4)), 1000);
      await store().applyPush(biz, push('d1', item(rec, 5)), 1000);
      const retry = await store().applyPush(biz, push('d1', item(rec, 2), item(rec, 1)), 1000);
      assert.deepEqual([retry.accepted, retry.applied.length, retry.rejections.length, retry.conflicts.length], [2, 0, 0, 0], 'both old versions of d1 are retries');
      const other = await store().applyPush(biz, push('d1', item(rec, 2, { changed: true })), 1000);
      assert.match(other.rejections[0]?.reason ?? '', /already pushed by this instance with different content/);
      assert.equal((await store().applyPush(biz, push('d2', item(rec, 3)), 1000)).accepted, 1, 'd2\'s version 3 is its own retry');
      assert.equal((await store().applyPush(biz, push('d4', item(rec, 3)), 1000)).conflicts.length, 1, 'd4 never pushed version 3: a conflict');
      assert.equal((await store().status(biz)).serverVersion, 5, 'nothing was applied twice');
    });

    test('pushes that share a transaction see each other: a retry and a conflict of a push in the same group', async () => {
      const biz = randomUUID();
      const rec = randomUUID();
      // Submitted in one turn, so they share one group-commit transaction.
      const [first, again, rival, next] = await Promise.all([
        store().applyPush(biz, push('d1', item(rec, 1)), 1000),
        store().applyPush(biz, push('d1', item(rec, 1)), 1000),
        store().applyPush(biz, push('d2', item(rec, 1, { rival: true })), 1000),
        store().applyPush(biz, push('d1', item(rec, 2)), 1000),
      ]);
      assert.deepEqual(first!.applied.map((c) => c.version), [1]);
      assert.deepEqual([again!.accepted, again!.applied.length], [1, 0], 'a retry of the push before it');
      assert.deepEqual([rival!.accepted, rival!.conflicts.length, rival!.conflicts[0]?.remote_data], [0, 1, '{"v":1}']);
      assert.deepEqual(next!.applied.map((c) => c.version), [2]);
      const page = await store().pull(biz, 0, 10);
      assert.deepEqual(page.changes.map((c) => [c.version, c.record_version, c.instance_id]), [[1, 1, 'd1'], [2, 2, 'd1']]);
    });

    test('conflicts are listed by id for each status filter and paged; resolving closes them, local applies a change', async () => {
      const biz = randomUUID();
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) {
        const rec = randomUUID();
        await store().applyPush(biz, push('d1', item(rec, 1), item(rec, 2)), 1000);
        ids.push((await store().applyPush(biz, push('d2', item(rec, 1, { local: i })), 1000)).conflicts[0]!.id);
      }
      assert.deepEqual((await store().listConflicts(biz, 'pending', 0, 10)).map((c) => c.id), ids);
      assert.deepEqual((await store().listConflicts(biz, 'all', ids[0]!, 1)).map((c) => c.id), [ids[1]]);
      const remote = await store().resolveConflict(biz, ids[0]!, 'remote', 2000, null);
      assert.deepEqual([remote.conflict.resolution, remote.applied], ['remote', null]);
      const local = await store().resolveConflict(biz, ids[1]!, 'local', 2000, null);
      assert.equal(local.applied?.version, 7);
      assert.equal(local.applied?.record_version, 3, 'one above the server\'s record version');
      assert.deepEqual((await store().listConflicts(biz, 'resolved', 0, 10)).map((c) => c.id), [ids[0], ids[1]]);
      assert.deepEqual((await store().listConflicts(biz, 'pending', 0, 10)).map((c) => c.id), [ids[2]]);
      assert.deepEqual((await store().listConflicts(biz, 'all', 0, 10)).map((c) => c.id), ids);
      await assert.rejects(store().resolveConflict(biz, ids[0]!, 'skip', 3000, null), (e: unknown) => e instanceof AppError && e.code === 'conflict');
      await assert.rejects(store().resolveConflict(randomUUID(), ids[2]!, 'skip', 3000, null), (e: unknown) => e instanceof AppError && e.code === 'not_found');
      await assert.rejects(store().resolveConflict(biz, 987_654_321, 'skip', 3000, null), (e: unknown) => e instanceof AppError && e.code === 'not_found');
      assert.deepEqual(await store().status(biz), { serverVersion: 7, pendingConflicts: 1 });
    });
  });
}
