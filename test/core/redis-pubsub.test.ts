import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createMemoryPubSub } from '../../src/core/pubsub/memory-pubsub.js';
import { createRedisPubSub } from '../../src/core/pubsub/redis-pubsub.js';
import { connectRedis } from '../../src/core/redis/connect-redis.js';
import type { PubSub } from '../../src/core/pubsub/pubsub.js';
import { REDIS_UP, TEST_REDIS_URL, redisOutageProxy, testPrefix } from '../helpers/redis.js';

interface Impl {
  name: string;
  /** Two pub/subs that must reach each other (two instances of one service). */
  open(): Promise<{ a: PubSub; b: PubSub; close(): Promise<void> }>;
}

const IMPLS: Impl[] = [
  {
    name: 'memory',
    async open() {
      const one = createMemoryPubSub();
      return { a: one, b: one, close: () => one.close() };
    },
  },
];
if (REDIS_UP) {
  IMPLS.push({
    name: 'redis',
    async open() {
      const prefix = testPrefix();
      const r1 = await connectRedis(TEST_REDIS_URL, 'test-a');
      const r2 = await connectRedis(TEST_REDIS_URL, 'test-b');
      const a = await createRedisPubSub(r1, prefix);
      const b = await createRedisPubSub(r2, prefix);
      return {
        a,
        b,
        async close() {
          await a.close();
          await b.close();
          r1.disconnect();
          r2.disconnect();
        },
      };
    },
  });
}

/** Collects messages and lets a test wait for the n-th one. */
function inbox() {
  const got: unknown[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  return {
    got,
    handler: (m: unknown) => {
      got.push(m);
      for (const w of waiters.filter((x) => got.length >= x.n)) w.resolve();
    },
    until: (n: number) => (got.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve }))),
  };
}

for (const impl of IMPLS) {
  describe(`PubSub conformance (${impl.name})`, () => {
    test('a message published by one instance reaches a subscriber of the other, as a copy', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      const box = inbox();
      await b.subscribe('business:1', box.handler);
      const sent = { type: 'change', version: 7, nested: { x: [1, 2] } };
      await a.publish('business:1', sent);
      await box.until(1);
      assert.deepEqual(box.got, [sent]);
      assert.notEqual(box.got[0], sent);
    });

    test('messages arrive in publish order', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      const box = inbox();
      await b.subscribe('c', box.handler);
      for (let i = 0; i < 20; i++) await a.publish('c', i);
      await box.until(20);
      assert.deepEqual(box.got, Array.from({ length: 20 }, (_, i) => i));
    });

    test('channels are isolated: a subscriber sees only its channel', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      const one = inbox();
      const two = inbox();
      await b.subscribe('business:1', one.handler);
      await b.subscribe('business:2', two.handler);
      await a.publish('business:2', 'for two');
      await a.publish('business:1', 'for one');
      await Promise.all([one.until(1), two.until(1)]);
      assert.deepEqual([one.got, two.got], [['for one'], ['for two']]);
    });

    test('every subscriber of a channel gets the message; unsubscribing stops only that one', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      const x = inbox();
      const y = inbox();
      const unsubX = await b.subscribe('c', x.handler);
      await b.subscribe('c', y.handler);
      await a.publish('c', 1);
      await Promise.all([x.until(1), y.until(1)]);
      await unsubX();
      await unsubX();
      await a.publish('c', 2);
      await y.until(2);
      assert.deepEqual([x.got, y.got], [[1], [1, 2]]);
    });
  });
}

describe('Redis pub/sub specifics', { skip: !REDIS_UP }, () => {
  test('services sharing one Redis do not hear each other (channel prefix)', async (t) => {
    const redis = await connectRedis(TEST_REDIS_URL, 'test');
    const sync = await createRedisPubSub(redis, testPrefix());
    const metrics = await createRedisPubSub(redis, testPrefix());
    t.after(async () => { await sync.close(); await metrics.close(); redis.disconnect(); });
    const heard = inbox();
    const control = inbox();
    await metrics.subscribe('c', heard.handler);
    await sync.subscribe('c', control.handler);
    await sync.publish('c', 'sync only');
    await control.until(1);
    assert.deepEqual(heard.got, []);
  });

  test('the subscriber re-subscribes after its connection drops', async (t) => {
    const prefix = testPrefix();
    const pubRedis = await connectRedis(TEST_REDIS_URL, 'test-pub');
    const subRedis = await connectRedis(TEST_REDIS_URL, `test-resub-${prefix.slice(2, 10)}`);
    const pub = await createRedisPubSub(pubRedis, prefix);
    const sub = await createRedisPubSub(subRedis, prefix);
    t.after(async () => { await pub.close(); await sub.close(); pubRedis.disconnect(); subRedis.disconnect(); });
    const box = inbox();
    await sub.subscribe('c', box.handler);
    const list = await pubRedis.client('LIST');
    const line = String(list).split('\n').find((l) => l.includes(`name=test-resub-${prefix.slice(2, 10)}-sub`));
    assert.ok(line, 'the subscriber connection is named');
    const id = /\bid=(\d+)/.exec(line)![1]!;
    await pubRedis.client('KILL', 'ID', id);
    // Publish until the re-subscribed connection hears one: messages sent during the reconnect are lost by contract.
    for (let i = 0; i < 100 && box.got.length === 0; i++) {
      await pub.publish('c', 'after reconnect');
      await Promise.race([box.until(1), sleep(50)]);
    }
    assert.equal(box.got[0], 'after reconnect');
  });

  test('a channel left while Redis is down is not subscribed again once Redis is back', async (t) => {
    const prefix = testPrefix();
    const outage = await redisOutageProxy();
    const direct = await connectRedis(TEST_REDIS_URL, 'test-numsub');
    const viaProxy = await connectRedis(outage.url, 'test-outage');
    const ps = await createRedisPubSub(viaProxy, prefix);
    t.after(async () => { await ps.close(); viaProxy.disconnect(); direct.disconnect(); await outage.close(); });
    const subscribers = async (channel: string) => (await direct.pubsub('NUMSUB', prefix + channel))[1];
    const leave = await ps.subscribe('left', () => undefined);
    assert.equal(await subscribers('left'), 1);
    await outage.down();
    await leave();
    await outage.up();
    // Each subscribe settles only once Redis answered it on the reconnected connection: the second is sent after
    // everything the reconnect sent (ioredis's re-SUBSCRIBEs and what follows them), so Redis has handled those.
    await ps.subscribe('after-1', () => undefined);
    await ps.subscribe('after-2', () => undefined);
    assert.equal(await subscribers('after-2'), 1);
    assert.equal(await subscribers('left'), 0);
  });

  test('a non-JSON message on the channel is ignored, later ones still arrive', async (t) => {
    const prefix = testPrefix();
    const redis = await connectRedis(TEST_REDIS_URL, 'test');
    const ps = await createRedisPubSub(redis, prefix);
    t.after(async () => { await ps.close(); redis.disconnect(); });
    const box = inbox();
    await ps.subscribe('c', box.handler);
    await redis.publish(`${prefix}c`, '{not json');
    await ps.publish('c', { ok: true });
    await box.until(1);
    assert.deepEqual(box.got, [{ ok: true }]);
  });
});

