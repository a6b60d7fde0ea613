import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { required } from '../helpers/backends.js';
import { REDIS_UP } from '../helpers/redis.js';
import { newUser, startSync } from '../helpers/sync.js';
import { call } from '../helpers/http.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';


test('on CI (CI=true) or with REQUIRE_*=1 PostgreSQL and Redis are required; elsewhere they are optional', () => {
  for (const name of ['POSTGRES', 'REDIS'] as const) {
    assert.equal(required(name, {}), false);
    assert.equal(required(name, { CI: 'true' }), true);
    assert.equal(required(name, { CI: '1' }), true);
    assert.equal(required(name, { [`REQUIRE_${name}`]: '1' }), true);
    assert.equal(required(name, { CI: 'false' }), false);
  }
});

test('under CI=true an unreachable PostgreSQL fails the run instead of skipping its tests', () => {
  const run = (env: Record<string, string>) => spawnSync(process.execPath, ['--import', 'tsx', '-e', "await import('./test/helpers/backends.ts'); console.log('loaded')"], {
    cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 60_000,
    env: { PATH: process.env['PATH'] ?? '', TEST_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', ...env },
  });
  const ci = run({ CI: 'true' });
  assert.notEqual(ci.status, 0, ci.stdout);
  assert.match(ci.stderr, /PostgreSQL is required/);
  const local = run({});
  assert.equal(local.status, 0, local.stderr);
  assert.match(local.stdout, /loaded/);
});

test('a sync instance started with shared: redis really counts in Redis', { skip: REDIS_UP ? false : 'needs Redis' }, async (t) => {
  const s = await startSync('sqlite', { userRateLimit: 2 }, { shared: 'redis' });
  t.after(() => s.close());
  assert.ok(s.deps.redis);
  const u = await newUser(s);
  for (let i = 0; i < 2; i++) assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200);
  const keys = await s.deps.redis.keys(`${s.deps.config.redisPrefix}rl:*`);
  assert.ok(keys.some((k) => k.endsWith(`sync:user:${u.id}`)), keys.join());
  // The test clock does not move Redis's windows; nextMinute drops them instead.
  assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 429);
  await s.nextMinute();
  assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200);
});
