import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { REDIS_UP, TEST_REDIS_URL, deletePrefix, testPrefix } from '../helpers/redis.js';
import { newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { createMemoryRateLimiter } from '../../src/core/rate-limit/memory-rate-limiter.js';
import { createRedisRateLimiter } from '../../src/core/rate-limit/redis-rate-limiter.js';
import type { RateLimiter } from '../../src/core/rate-limit/rate-limiter.js';
import { countLoginAttempt, loginFailed } from '../../src/sync/accounts/login-lockout.js';
import { createHashGate } from '../../src/sync/accounts/hash-gate.js';
import { loginUser } from '../../src/sync/accounts/register-and-login.js';
import type { AccountsContext } from '../../src/sync/accounts/accounts-context.js';
import { isAppError } from '../../src/core/errors.js';

const BURST = 40;
const THRESHOLD = 5;

/**
 * The lockout bounds guesses per run of failures: at most THRESHOLD wrong passwords are checked, plus THRESHOLD more
 * after each successful login (a success starts a new run, in a burst as when sequential; only the password holder
 * can cause one).
 */
function assertBounded(statuses: number[]): void {
  const successes = statuses.filter((st) => st === 200).length;
  const guesses = statuses.filter((st) => st === 401).length;
  assert.equal(successes + guesses + statuses.filter((st) => st === 429).length, BURST, `only 200, 401 and 429: ${statuses.join(',')}`);
  assert.ok(successes <= 1);
  assert.ok(guesses <= THRESHOLD * (1 + successes), `${guesses} wrong passwords were checked (${successes} success): ${statuses.join(',')}`);
}

/** 39 wrong passwords and the right one somewhere in the middle, all at once. */
function burst<T>(right: () => Promise<T>, wrong: (i: number) => Promise<T>): Promise<T[]> {
  const at = Math.floor(BURST / 2);
  return Promise.all(Array.from({ length: BURST }, (_, i) => (i === at ? right() : wrong(i))));
}

for (const backend of BACKENDS) {
  describe(`sync login lockout under a parallel burst on ${backend}`, () => {
    let s: SyncUnderTest;
    // The hashing queue is large enough that no attempt of the burst is shed with 503: the lockout alone must hold.
    before(async () => { s = await startSync(backend, { passwordHashQueue: 100 }); });
    after(() => s.close());

    test('40 parallel logins for one address (39 wrong, 1 right) get at most 5 wrong passwords checked per run; the rest are 429', async () => {
      const u = await newUser(s);
      const login = (password: string) => call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password } });
      const replies = await burst(() => login(u.password), (i) => login(`wrong password ${i}`));
      assertBounded(replies.map((r) => r.status));
      for (const r of replies.filter((x) => x.status === 429)) {
        assert.equal(r.body.error, 'rate_limited');
        assert.ok(Number(r.headers.get('retry-after')) > 0);
      }
    });

    test('four failures around one success do not lock the address: the failures counted before the success are of the old run', async () => {
      const u = await newUser(s);
      // Each login is held once counted (at its account read) until the test lets its password be checked.
      const reached: Array<() => void> = [];
      const released: Array<() => void> = [];
      const gates = Array.from({ length: 5 }, () => ({
        reached: new Promise<void>((r) => reached.push(r)), released: new Promise<void>((r) => released.push(r)),
      }));
      let n = 0;
      const accounts = { ...s.deps.accounts, async findUserByEmail(email: string) {
        const i = n++;
        reached[i]?.();
        await gates[i]?.released;
        return s.deps.accounts.findUserByEmail(email);
      } };
      const ctx: AccountsContext = { ...s.deps, accounts, passwordHashes: createHashGate({ concurrency: 10, queue: 10 }) };
      const outcome = (p: Promise<unknown>) => p.then(() => 'signed in', (e: unknown) => (isAppError(e) ? e.code : String(e)));
      // Counted one after another: wrong, wrong, RIGHT, wrong, wrong (the fifth is the threshold-th).
      const passwords = ['wrong password 1', 'wrong password 2', u.password, 'wrong password 4', 'wrong password 5'];
      const answers: Array<Promise<string>> = [];
      for (const [i, password] of passwords.entries()) {
        answers.push(outcome(loginUser(ctx, { email: u.email, password })));
        await gates[i]!.reached;
      }
      released[2]!();
      assert.equal(await answers[2], 'signed in', 'the right password is checked first: the count starts again');
      for (const i of [0, 1, 3, 4]) { released[i]!(); assert.equal(await answers[i], 'unauthorized'); }
      assert.equal(await outcome(loginUser(s.deps, { email: u.email, password: u.password })), 'signed in', 'four failures and a success lock nothing');
    });

    test('after a burst of wrong guesses the address is locked: even the right password is refused', async () => {
      const u = await newUser(s);
      const login = (password: string) => call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password } });
      const replies = await Promise.all(Array.from({ length: BURST }, (_, i) => login(`wrong password ${i}`)));
      assert.equal(replies.filter((r) => r.status === 401).length, THRESHOLD);
      assert.equal((await login(u.password)).status, 429);
    });
  });
}

describe('sync login lockout across instances sharing Redis', { skip: REDIS_UP ? false : 'Redis not reachable' }, () => {
  let s: SyncUnderTest;
  let redisA: Redis;
  let redisB: Redis;
  const prefix = testPrefix();
  before(async () => {
    s = await startSync('sqlite');
    redisA = new Redis(TEST_REDIS_URL);
    redisB = new Redis(TEST_REDIS_URL);
  });
  after(async () => {
    await deletePrefix(redisA, prefix);
    redisA.disconnect();
    redisB.disconnect();
    await s.close();
  });

  test('two instances (own Redis connections, own hashing queues) together check at most 5 wrong passwords per run of 40 parallel guesses', async () => {
    const u = await newUser(s);
    // Each instance as the service builds it: the same accounts, its own limiter connection and hashing gate.
    const instance = (redis: Redis): AccountsContext => ({
      accounts: s.deps.accounts,
      rateLimiter: createRedisRateLimiter(redis, prefix),
      passwordHashes: createHashGate({ concurrency: 2, queue: 100 }),
      now: Date.now,
      config: s.deps.config,
    });
    const instances = [instance(redisA), instance(redisB)];
    const outcome = (p: Promise<unknown>) => p.then(() => 200, (e: unknown) => (isAppError(e) ? e.status : 500));
    const statuses = await burst(
      () => outcome(loginUser(instances[0]!, { email: u.email, password: u.password })),
      (i) => outcome(loginUser(instances[i % 2]!, { email: u.email, password: `wrong password ${i}` })),
    );
    assertBounded(statuses);
  });
});

test('an attempt that found no lock and is counted only after the lock started is refused, not checked as the first of a new count', async () => {
  const shared = createMemoryRateLimiter();
  const config = { lockoutThreshold: THRESHOLD, lockoutSeconds: 60 } as AccountsContext['config'];
  const ctx = { rateLimiter: shared, config } as AccountsContext;
  // The late attempt's count waits at this gate, after it looked for the lock: another instance, a slow connection.
  let open!: () => void;
  const gate = new Promise<void>((resolve) => { open = resolve; });
  const late: RateLimiter = { ...shared, hitSliding: async (...args) => { await gate; return shared.hitSliding(...args); } };
  const attempts = [];
  for (let i = 0; i < THRESHOLD; i++) attempts.push(await countLoginAttempt(ctx, 'a@example.com'));
  const waiting = countLoginAttempt({ ...ctx, rateLimiter: late }, 'a@example.com');
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(attempts.at(-1)!.last);
  await loginFailed(ctx, attempts.at(-1)!);
  open();
  await assert.rejects(waiting, (e: unknown) => isAppError(e) && e.code === 'rate_limited');
  await assert.rejects(countLoginAttempt(ctx, 'a@example.com'), (e: unknown) => isAppError(e) && e.code === 'rate_limited', 'and the address is locked');
});
