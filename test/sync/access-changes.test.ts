// Why: the feed's notifications promise never to throw (a commit or a logout must not fail because pub/sub did);
// these tests make each dependency fail and check the promise and the warning that replaces the message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMemoryPubSub } from '../../src/core/pubsub/memory-pubsub.js';
import type { PubSub } from '../../src/core/pubsub/pubsub.js';
import type { BusinessStore } from '../../src/sync/businesses/business-store.js';
import { announceUserAccessChange, withUserAccessChange } from '../../src/sync/feed/access-changes.js';
import { announceAccessChange, businessChannel, createPubSubNotifier, withAccessChange } from '../../src/sync/feed/change-events.js';

function recordingLog() {
  const warnings: Array<{ obj: object; msg: string }> = [];
  return { warnings, warn: (obj: object, msg: string) => void warnings.push({ obj, msg }) };
}

const failingPubSub: PubSub = {
  publish: () => Promise.reject(new Error('redis down')),
  subscribe: () => Promise.reject(new Error('redis down')),
  close: () => Promise.resolve(),
};

function businessesOf(list: () => Promise<Array<{ id: string }>>): BusinessStore {
  return { listBusinessesOf: list } as unknown as BusinessStore;
}

test('announceAccessChange publishes a recheck on the business channel', async () => {
  const pubsub = createMemoryPubSub();
  const got: unknown[] = [];
  await pubsub.subscribe(businessChannel('b1'), (m) => got.push(m));
  const log = recordingLog();
  await announceAccessChange(pubsub, log, 'b1');
  assert.deepEqual(got, [{ business_id: 'b1', recheck: true }]);
  assert.equal(log.warnings.length, 0);
  await pubsub.close();
});

test('announceAccessChange resolves and warns when the publish fails', async () => {
  const log = recordingLog();
  await announceAccessChange(failingPubSub, log, 'b1');
  assert.equal(log.warnings.length, 1);
  assert.match(log.warnings[0]!.msg, /next heartbeat/);
  assert.deepEqual((log.warnings[0]!.obj as { businessId: string }).businessId, 'b1');
});

test('announceUserAccessChange announces in every business of the user', async () => {
  const pubsub = createMemoryPubSub();
  const got: string[] = [];
  for (const id of ['b1', 'b2', 'b3']) await pubsub.subscribe(businessChannel(id), (m) => got.push((m as { business_id: string }).business_id));
  const log = recordingLog();
  await announceUserAccessChange({ pubsub, businesses: businessesOf(() => Promise.resolve([{ id: 'b1' }, { id: 'b3' }])) }, log, 'u1');
  assert.deepEqual(got.sort(), ['b1', 'b3']);
  assert.equal(log.warnings.length, 0);
  await pubsub.close();
});

test('announceUserAccessChange resolves and warns when the businesses cannot be listed', async () => {
  const pubsub = createMemoryPubSub();
  let published = 0;
  const counting: PubSub = { ...pubsub, publish: (c, m) => { published++; return pubsub.publish(c, m); } };
  const log = recordingLog();
  await announceUserAccessChange({ pubsub: counting, businesses: businessesOf(() => Promise.reject(new Error('db down'))) }, log, 'u1');
  assert.equal(published, 0);
  assert.equal(log.warnings.length, 1);
  assert.equal((log.warnings[0]!.obj as { userId: string }).userId, 'u1');
  await pubsub.close();
});

test('announceUserAccessChange resolves with one warning per business whose publish fails', async () => {
  const log = recordingLog();
  await announceUserAccessChange({ pubsub: failingPubSub, businesses: businessesOf(() => Promise.resolve([{ id: 'b1' }, { id: 'b2' }])) }, log, 'u1');
  assert.deepEqual(log.warnings.map((w) => (w.obj as { businessId: string }).businessId).sort(), ['b1', 'b2']);
});

test('the change notifier resolves and warns when the publish fails, and sends nothing for no changes', async () => {
  const log = recordingLog();
  const change = { table_name: 't', record_uuid: 'r', version: 1, instance_id: 'i', operation: 'create' as const, data: '{}', record_version: 1, created_at: '2026-01-01T00:00:00.000Z' };
  await createPubSubNotifier(failingPubSub, log).notify('b1', [change]);
  assert.equal(log.warnings.length, 1);
  assert.match(log.warnings[0]!.msg, /catch up by pulling/);
  await createPubSubNotifier(failingPubSub, log).notify('b1', []);
  assert.equal(log.warnings.length, 1, 'an empty batch is not published');
});

test('withAccessChange publishes a hold in each business before the change runs and its release after, also when the change fails', async () => {
  const pubsub = createMemoryPubSub();
  const seen: string[] = [];
  for (const id of ['b1', 'b2']) await pubsub.subscribe(businessChannel(id), (m) => seen.push(JSON.stringify(m)));
  const log = recordingLog();
  const result = await withAccessChange(pubsub, log, ['b1', 'b2'], async () => { seen.push('change'); return 42; });
  assert.equal(result, 42);
  const holds = seen.slice(0, 2).map((m) => JSON.parse(m) as { business_id: string; hold: string });
  assert.deepEqual(holds.map((h) => h.business_id).sort(), ['b1', 'b2']);
  assert.equal(seen[2], 'change', 'both holds are published before the change runs');
  const releases = seen.slice(3).map((m) => JSON.parse(m) as { business_id: string; recheck: boolean; release: string });
  assert.deepEqual(releases.map((r) => [r.business_id, r.recheck, r.release]).sort(), [['b1', true, holds[0]!.hold], ['b2', true, holds[0]!.hold]]);
  assert.equal(holds[0]!.hold, holds[1]!.hold, 'one hold for the one change');
  seen.length = 0;
  await assert.rejects(withAccessChange(pubsub, log, ['b1'], async () => { throw new Error('not a member'); }), /not a member/);
  assert.deepEqual(seen.map((m) => Object.keys(JSON.parse(m) as object).sort().join()), ['business_id,hold', 'business_id,recheck,release'], 'released all the same');
  assert.equal(log.warnings.length, 0);
  await pubsub.close();
});

test('withAccessChange runs the change when pub/sub is down, with a warning for the hold and for the release', async () => {
  const log = recordingLog();
  let ran = false;
  await withAccessChange(failingPubSub, log, ['b1'], async () => { ran = true; });
  assert.ok(ran);
  assert.equal(log.warnings.length, 2);
  assert.match(log.warnings[0]!.msg, /access hold not announced/);
});

test('withUserAccessChange holds every business of the user; if they cannot be listed, the change runs unannounced with a warning', async () => {
  const pubsub = createMemoryPubSub();
  const got: string[] = [];
  for (const id of ['b1', 'b2', 'b3']) await pubsub.subscribe(businessChannel(id), (m) => got.push((m as { business_id: string }).business_id));
  const log = recordingLog();
  await withUserAccessChange({ pubsub, businesses: businessesOf(() => Promise.resolve([{ id: 'b1' }, { id: 'b3' }])) }, log, 'u1', async () => undefined);
  assert.deepEqual(got.sort(), ['b1', 'b1', 'b3', 'b3'], 'a hold and a release in each');
  got.length = 0;
  let ran = false;
  await withUserAccessChange({ pubsub, businesses: businessesOf(() => Promise.reject(new Error('db down'))) }, log, 'u1', async () => { ran = true; });
  assert.ok(ran);
  assert.deepEqual(got, []);
  assert.equal(log.warnings.length, 1);
  await pubsub.close();
});
