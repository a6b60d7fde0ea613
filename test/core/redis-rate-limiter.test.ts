import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createMemoryRateLimiter } from '../../src/core/rate-limit/memory-rate-limiter.js';
import { createRedisRateLimiter } from '../../src/core/rate-limit/redis-rate-limiter.js';
import { connectRedis } from '../../src/core/redis/connect-redis.js';
import type { RateLimiter } from '../../src/core/rate-limit/rate-limiter.js';
import { isAppError } from '../../src/core/errors.js';
import { REDIS_UP, TEST_REDIS_URL, deletePrefix, testPrefix } from '../helpers/redis.js';

interface Impl {
  name: string;
  /** Two limiters that must count together (two instances of one service). */
  open(): Promise<{ a: RateLimiter; b: RateLimiter; close(): Promise<void> }>;
}

const IMPLS: Impl[] = [
  {
    name: 'memory',
    async open() {
      const one = createMemoryRateLimiter();
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
      return {
        a: createRedisRateLimiter(r1, prefix),
        b: createRedisRateLimiter(r2, prefix),
        async close() {
          await deletePrefix(r1, prefix);
          r1.disconnect();
          r2.disconnect();
        },
      };
    },
  });
}

for (const impl of IMPLS) {
  describe(`RateLimiter conformance (${impl.name})`, () => {
    test('allows up to the limit, then refuses with the time left in the window', async (t) => {
      const { a, close } = await impl.open();
      t.after(close);
      for (let i = 1; i <= 3; i++) {
        const r = await a.hit('user:1', 3, 60_000);
        assert.deepEqual([r.allowed, r.count], [true, i]);
      }
      const r = await a.hit('user:1', 3, 60_000);
      assert.equal(r.allowed, false);
      assert.equal(r.count, 4);
      assert.ok(r.retryAfterMs > 0 && r.retryAfterMs <= 60_000, `retryAfterMs ${r.retryAfterMs}`);
    });

    test('keys are counted independently', async (t) => {
      const { a, close } = await impl.open();
      t.after(close);
      await a.hit('k1', 1, 60_000);
      assert.equal((await a.hit('k1', 1, 60_000)).allowed, false);
      assert.equal((await a.hit('k2', 1, 60_000)).allowed, true);
    });

    test('two instances share one count', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).hit('shared', 100, 60_000)));
      assert.equal((await a.inspect('shared')).count, 10);
      assert.equal((await b.inspect('shared')).count, 10);
    });

    test('concurrent hits are counted exactly once each', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).hit('race', 20, 60_000)));
      assert.equal(results.filter((r) => r.allowed).length, 20);
      assert.deepEqual(results.map((r) => r.count).sort((x, y) => x - y), Array.from({ length: 50 }, (_, i) => i + 1));
    });

    test('inspect reads without counting; reset forgets the key', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      assert.equal((await a.inspect('p')).count, 0);
      await a.hit('p', 5, 60_000);
      assert.equal((await b.inspect('p')).count, 1);
      assert.equal((await b.inspect('p')).count, 1);
      await b.reset('p');
      assert.equal((await a.inspect('p')).count, 0);
      assert.equal((await a.hit('p', 5, 60_000)).count, 1);
    });

    test('inspect reads the count and time left without counting, and never opens a window', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      assert.deepEqual(await a.inspect('i'), { count: 0, retryAfterMs: 0 });
      assert.deepEqual(await a.inspect('i'), { count: 0, retryAfterMs: 0 });
      await a.hit('i', 5, 60_000);
      await a.hit('i', 5, 60_000);
      const w = await b.inspect('i');
      assert.equal(w.count, 2);
      assert.ok(w.retryAfterMs > 0 && w.retryAfterMs <= 60_000, `retryAfterMs ${w.retryAfterMs}`);
      assert.equal((await b.inspect('i')).count, 2);
    });

    test('sliding: a hit counts the hits of the last window, on either instance, and once each', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).hitSliding('s', 3, 60_000)));
      assert.deepEqual(results.map((r) => r.count).sort(), [1, 2, 3, 4, 4, 4], 'only the newest limit + 1 hits are kept');
      assert.equal(results.filter((r) => r.allowed).length, 3);
      for (const r of results) assert.ok(r.retryAfterMs > 0 && r.retryAfterMs <= 60_000, `retryAfterMs ${r.retryAfterMs}`);
      await b.reset('s');
      assert.deepEqual([(await a.hitSliding('s', 3, 60_000)).count, (await a.hitSliding('other', 3, 60_000)).count], [1, 1]);
    });

    test('sliding: the end of the first hit\'s window lets no second burst through, only what left the window', async (t) => {
      const { a, b, close } = await impl.open();
      t.after(close);
      // A fixed window from the first hit would start over at 2 s and allow three more at once.
      await a.hitSliding('edge', 3, 2_000);
      await sleep(1_200);
      await b.hitSliding('edge', 3, 2_000);
      await a.hitSliding('edge', 3, 2_000);
      await sleep(1_200);
      const third = await b.hitSliding('edge', 3, 2_000);
      assert.deepEqual([third.allowed, third.count], [true, 3], 'the first hit left the window; the two at 1.2 s did not');
      const fourth = await a.hitSliding('edge', 3, 2_000);
      assert.deepEqual([fourth.allowed, fourth.count], [false, 4]);
      assert.ok(fourth.retryAfterMs > 0 && fourth.retryAfterMs <= 1_000, `retryAfterMs ${fourth.retryAfterMs}: until the hits at 1.2 s leave`);
    });

    test('a new window starts once the old one has expired', async (t) => {
      const { a, close } = await impl.open();
      t.after(close);
      await a.hit('w', 1, 100);
      assert.equal((await a.hit('w', 1, 100)).allowed, false);
      await sleep(250);
      const r = await a.hit('w', 1, 100);
      assert.deepEqual([r.allowed, r.count], [true, 1]);
    });
  });
}

describe('Redis rate limiter specifics', { skip: !REDIS_UP }, () => {
  test('keys live under the prefix and carry the window as their TTL', async (t) => {
    const prefix = testPrefix();
    const redis = await connectRedis(TEST_REDIS_URL, 'test');
    t.after(async () => { await deletePrefix(redis, prefix); redis.disconnect(); });
    await createRedisRateLimiter(redis, prefix).hit('ip:1.2.3.4', 20, 60_000);
    const keys = await redis.keys(`${prefix}*`);
    assert.deepEqual(keys, [`${prefix}rl:ip:1.2.3.4`]);
    const ttl = await redis.pttl(keys[0]!);
    assert.ok(ttl > 0 && ttl <= 60_000);
  });

  test('a counter that lost its expiry is given one again', async (t) => {
    const prefix = testPrefix();
    const redis = await connectRedis(TEST_REDIS_URL, 'test');
    t.after(async () => { await deletePrefix(redis, prefix); redis.disconnect(); });
    await redis.set(`${prefix}rl:stuck`, '7');
    const r = await createRedisRateLimiter(redis, prefix).hit('stuck', 100, 60_000);
    assert.equal(r.count, 8);
    assert.ok((await redis.pttl(`${prefix}rl:stuck`)) > 0);
  });

  test('when Redis is unreachable a hit fails as unavailable (503) with retry_after, never allowed', async () => {
    const redis = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    redis.on('error', () => undefined);
    const limiter = createRedisRateLimiter(redis, testPrefix());
    await assert.rejects(limiter.hit('k', 1, 1000), (e: unknown) => isAppError(e) && e.code === 'unavailable' && e.status === 503 && e.extra?.['retry_after'] === 5);
    redis.disconnect();
  });

  test('connectRedis fails the start with a message naming the URL but not its password', async () => {
    await assert.rejects(connectRedis('redis://:hunter2@127.0.0.1:1', 'test'), (e: unknown) => {
      const msg = e instanceof Error ? e.message : '';
      return msg.includes('not reachable') && msg.includes('127.0.0.1:1') && !msg.includes('hunter2');
    });
  });
});
