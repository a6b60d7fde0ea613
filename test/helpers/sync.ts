import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { loadSyncConfig, type SyncConfig } from '../../src/sync/config.js';
import { createSyncDeps, type SyncDeps } from '../../src/sync/deps.js';
import { buildSyncApp } from '../../src/sync/app.js';
import type { App } from '../../src/core/http/create-app.js';
import { TEST_REDIS_URL, freshStorage, type BackendName, type TestStorage } from './backends.js';
import { REDIS_UP, deletePrefix, testPrefix } from './redis.js';
import { call, listen } from './http.js';

/** A clock tests can move forward (token expiry, lockouts) without waiting. */
export interface TestClock {
  now(): number;
  advance(ms: number): void;
  /** Stops time (until `resume`), so two answers computed moments apart can be compared exactly. */
  freeze(): void;
  resume(): void;
}

/**
 * Where the limiter and the pub/sub live: this process's memory, or Redis
 * (as with REDIS_URL in production). Suites of rate limits and the feed run on
 * every one (`SHARED_STATES`), so the Redis code paths are exercised end to end.
 */
export type SharedStateName = 'memory' | 'redis';
export const SHARED_STATES: SharedStateName[] = REDIS_UP ? ['memory', 'redis'] : ['memory'];

export interface SyncUnderTest {
  url: string;
  /** Where this instance's limiter and pub/sub live. */
  shared: SharedStateName;
  app: App;
  deps: SyncDeps;
  clock: TestClock;
  /** Every log line written so far (to check what never reaches the logs). */
  logs: string[];
  /**
   * Moves to the next rate-limit window: the clock goes 61 s forward and, on
   * Redis (whose windows follow Redis's own time), this instance's counters are dropped.
   */
  nextMinute(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Test defaults: cheap scrypt (the production cost is exercised by the
 * password-hash unit test) and limits high enough not to interfere; tests of
 * limits lower them through `overrides`.
 */
// The event-loop bound of load shedding is off: an in-process test shares the loop with its own client, so a busy
// test (or machine) would shed the requests it is checking; the load-shedding tests turn it on.
const TEST_DEFAULTS: Partial<SyncConfig> = { scryptLog2N: 10, userRateLimit: 100_000, ipRateLimit: 100_000, logLevel: 'warn', maxEventLoopDelayMs: 0 };

export interface StartSyncOptions {
  /** Registers extra routes before the app listens (tests of the auth guard's contract). */
  extraRoutes?: (app: App, deps: SyncDeps) => void;
  /** Limiter and pub/sub in memory (default) or in Redis under a prefix of this instance's own. */
  shared?: SharedStateName;
  /** Runs on this storage, which the caller cleans up (a test restarting the service on the same data), instead of a fresh one. */
  storage?: TestStorage;
}

/** Starts the sync service on a fresh database of `backend` and an ephemeral port. Call `close()` (e.g. in `t.after`). */
export async function startSync(backend: BackendName, overrides: Partial<SyncConfig> = {}, options: StartSyncOptions = {}): Promise<SyncUnderTest> {
  const storage = options.storage ?? await freshStorage(backend);
  const shared = options.shared ?? 'memory';
  const prefix = testPrefix();
  const config: SyncConfig = {
    ...loadSyncConfig(),
    ...TEST_DEFAULTS,
    dataDir: storage.dataDir,
    databaseUrl: storage.databaseUrl,
    dbSchema: storage.pgSchema,
    ...(shared === 'redis' ? { redisUrl: TEST_REDIS_URL, redisPrefix: prefix } : {}),
    ...overrides,
  };
  let offset = 0;
  let frozenAt: number | undefined;
  const clock: TestClock = {
    now: () => frozenAt ?? Date.now() + offset,
    advance: (ms) => { offset += ms; if (frozenAt !== undefined) frozenAt += ms; },
    freeze: () => { frozenAt = Date.now() + offset; },
    resume: () => { frozenAt = undefined; },
  };
  const logs: string[] = [];
  const logStream = new Writable({ write(chunk, _enc, cb) { logs.push(String(chunk)); cb(); } });
  const deps = await createSyncDeps(config, { now: clock.now });
  const app = await buildSyncApp(deps, { logStream });
  options.extraRoutes?.(app, deps);
  const url = await listen(app);
  return {
    url, app, deps, clock, logs, shared,
    async nextMinute() {
      clock.advance(61_000);
      if (deps.redis) await deletePrefix(deps.redis, `${prefix}rl:`);
    },
    async close() {
      await app.close();
      if (deps.redis) await deletePrefix(deps.redis, prefix);
      await deps.close();
      if (!options.storage) await storage.cleanup();
    },
  };
}

export interface TestUser {
  id: string;
  email: string;
  name: string;
  password: string;
  /** User access token. */
  token: string;
  refreshToken: string;
}

/** Registers a new user through the API. */
export async function newUser(s: { url: string }, overrides: { email?: string; name?: string; password?: string } = {}): Promise<TestUser> {
  const email = overrides.email ?? `user-${randomBytes(5).toString('hex')}@example.com`;
  const name = overrides.name ?? 'Test User';
  const password = overrides.password ?? `pw-${randomBytes(9).toString('base64url')}`;
  const r = await call(s.url, 'POST', '/api/auth/register', { json: { email, name, password } });
  if (r.status !== 201) throw new Error(`register failed: ${r.status} ${r.text}`);
  return { id: r.body.user.id, email: r.body.user.email, name, password, token: r.body.token, refreshToken: r.body.refresh_token };
}

/** A random ABN that passes the official checksum. */
export function validAbn(): string {
  for (;;) {
    const digits = [1 + Math.floor(Math.random() * 9), ...Array.from({ length: 10 }, () => Math.floor(Math.random() * 10))];
    const weights = [10, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19];
    const sum = digits.reduce((acc, d, i) => acc + (i === 0 ? d - 1 : d) * weights[i]!, 0);
    if (sum % 89 === 0) return digits.join('');
  }
}

export interface TestBusiness {
  id: string;
  name: string;
  abn: string;
}

/** Creates a business owned by `owner` through the API. */
export async function newBusiness(s: { url: string }, owner: { token: string }, overrides: { name?: string; abn?: string } = {}): Promise<TestBusiness> {
  const name = overrides.name ?? `Business ${randomBytes(3).toString('hex')}`;
  const abn = overrides.abn ?? validAbn();
  const r = await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name, abn } });
  if (r.status !== 201) throw new Error(`create business failed: ${r.status} ${r.text}`);
  return { id: r.body.id, name, abn };
}

/** Adds `member` to the business as `owner` (role `member` unless given). */
export async function addMember(s: { url: string }, owner: { token: string }, businessId: string, member: { email: string }, role: 'owner' | 'member' = 'member'): Promise<void> {
  const r = await call(s.url, 'POST', `/api/business/${businessId}/members`, { token: owner.token, json: { email: member.email, role } });
  if (r.status !== 201) throw new Error(`add member failed: ${r.status} ${r.text}`);
}

/** A business-scoped token for `user` (a member of the business). */
export async function businessToken(s: { url: string }, user: { token: string }, businessId: string): Promise<string> {
  const r = await call(s.url, 'POST', '/api/auth/token', { token: user.token, json: { business_id: businessId } });
  if (r.status !== 200) throw new Error(`business token failed: ${r.status} ${r.text}`);
  return r.body.token;
}
