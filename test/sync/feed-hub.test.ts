import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createMemoryPubSub } from '../../src/core/pubsub/memory-pubsub.js';
import type { PubSub } from '../../src/core/pubsub/pubsub.js';
import { businessChannel, type ChangeBatch } from '../../src/sync/feed/change-events.js';
import { createFeedHub, NO_LONGER_AUTHORIZED, SLOW_CONSUMER, type FeedSocket } from '../../src/sync/feed/feed-hub.js';

/** A socket that records what the hub does to it; `bufferedAmount` is set by the test. */
class FakeSocket extends EventEmitter implements FeedSocket {
  bufferedAmount = 0;
  readyState = 1;
  sent: string[] = [];
  pings = 0;
  closedWith: number | undefined;
  terminated = false;
  send(data: string) { this.sent.push(data); }
  ping() { this.pings++; }
  close(code: number) { this.closedWith = code; }
  terminate() {
    this.terminated = true;
    this.readyState = 3;
    this.emit('close');
  }
}

const silent = { warn: () => undefined };
const allowed = async () => true;
const BIZ = '11111111-1111-4111-8111-111111111111';
const batch = (n: number): ChangeBatch => ({
  business_id: BIZ,
  events: Array.from({ length: n }, (_, i) => ({ type: 'change', table_name: 't', record_uuid: BIZ, version: i + 1, instance_id: 'd' })),
});

test('a socket that does not answer a ping is dropped at the next heartbeat; one that answers stays', async (t) => {
  const hub = createFeedHub(createMemoryPubSub(), { heartbeatMs: 3_600_000, maxBufferedBytes: 1024 }, silent);
  t.after(() => hub.close());
  const live = new FakeSocket();
  const dead = new FakeSocket();
  await hub.add(BIZ, live, allowed);
  await hub.add(BIZ, dead, allowed);
  await hub.heartbeat();
  assert.deepEqual([live.pings, dead.pings], [1, 1]);
  live.emit('pong');
  await hub.heartbeat();
  assert.equal(dead.terminated, true);
  assert.equal(live.terminated, false);
  assert.equal(live.pings, 2);
  assert.equal(hub.size, 1);
});

test('a slow consumer is disconnected with 1013 instead of buffering without bound; others keep receiving', async (t) => {
  const pubsub = createMemoryPubSub();
  const hub = createFeedHub(pubsub, { heartbeatMs: 3_600_000, maxBufferedBytes: 1024 }, silent);
  t.after(() => hub.close());
  const slow = new FakeSocket();
  const fast = new FakeSocket();
  await hub.add(BIZ, slow, allowed);
  await hub.add(BIZ, fast, allowed);
  await pubsub.publish(businessChannel(BIZ), { unexpected: true });
  await pubsub.publish(businessChannel(BIZ), batch(2));
  assert.equal(slow.sent.length, 2, 'a malformed message is dropped, a batch is delivered');
  slow.bufferedAmount = 1025;
  await pubsub.publish(businessChannel(BIZ), batch(3));
  assert.equal(slow.sent.length, 2, 'nothing more is queued for it');
  assert.equal(slow.closedWith, SLOW_CONSUMER);
  assert.equal(slow.terminated, true);
  assert.equal(fast.sent.length, 5);
  assert.deepEqual(JSON.parse(fast.sent[4]!), batch(3).events[2]);
});

test('one pub/sub subscription per business, dropped with its last socket', async (t) => {
  const inner = createMemoryPubSub();
  let active = 0;
  const counting: PubSub = {
    publish: (c, m) => inner.publish(c, m),
    async subscribe(c, fn) {
      active++;
      const off = await inner.subscribe(c, fn);
      return async () => { active--; await off(); };
    },
    close: () => inner.close(),
  };
  const hub = createFeedHub(counting, { heartbeatMs: 3_600_000, maxBufferedBytes: 1024 }, silent);
  t.after(() => hub.close());
  const a = new FakeSocket();
  const b = new FakeSocket();
  await hub.add(BIZ, a, allowed);
  await hub.add(BIZ, b, allowed);
  assert.equal(active, 1);
  a.emit('close');
  assert.equal(active, 1);
  b.emit('close');
  await new Promise((r) => setImmediate(r));
  assert.equal(active, 0);
  assert.equal(hub.size, 0);
});

test('at each heartbeat a socket whose credentials no longer grant the feed is closed with 1008; a failed check keeps it', async (t) => {
  const warnings: unknown[] = [];
  const hub = createFeedHub(createMemoryPubSub(), { heartbeatMs: 3_600_000, maxBufferedBytes: 1024 }, { warn: (o) => warnings.push(o) });
  t.after(() => hub.close());
  let memberStill = true;
  const stays = new FakeSocket();
  const removed = new FakeSocket();
  const flaky = new FakeSocket();
  await hub.add(BIZ, stays, allowed);
  await hub.add(BIZ, removed, async () => memberStill);
  await hub.add(BIZ, flaky, async () => { throw new Error('database away'); });
  await hub.heartbeat();
  assert.equal(removed.closedWith, undefined);
  memberStill = false;
  for (const s of [stays, removed, flaky]) s.emit('pong');
  await hub.heartbeat();
  assert.equal(removed.closedWith, NO_LONGER_AUTHORIZED);
  assert.equal(stays.closedWith, undefined);
  assert.equal(flaky.closedWith, undefined);
  assert.equal(warnings.length, 2);
});
