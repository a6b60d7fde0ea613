import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call } from '../helpers/http.js';
import { REDIS_UP, redisOutageProxy, testPrefix } from '../helpers/redis.js';
import { newUser, startSync } from '../helpers/sync.js';

/**
 * The service with its rate-limit counters and feed in a Redis that goes away (docs/sync-api.md, 503 row;
 * docs/deployment.md): requests it limits fail closed with 503 and a retry hint, nothing is let through uncounted,
 * and they are served again once Redis is back.
 */
test('while Redis is unreachable, rate-limited requests get 503 unavailable with retry_after 5; served again once it is back', { skip: !REDIS_UP && 'Redis not reachable' }, async (t) => {
  const outage = await redisOutageProxy();
  const s = await startSync('sqlite', { redisUrl: outage.url, redisPrefix: testPrefix() });
  t.after(async () => { await s.close(); await outage.close(); });
  const u = await newUser(s);
  assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200);
  await outage.down();
  for (const [method, path, json] of [
    ['GET', '/api/business', undefined],
    ['POST', '/api/auth/login', { email: u.email, password: u.password }],
  ] as const) {
    const r = await call(s.url, method, path, { ...(path === '/api/business' ? { token: u.token } : {}), ...(json ? { json } : {}) });
    assert.deepEqual([r.status, r.body.error, r.body.retry_after, r.headers.get('retry-after')], [503, 'unavailable', 5, '5'], `${method} ${path}`);
  }
  assert.equal((await call(s.url, 'GET', '/readyz')).status, 503, 'not ready: a balancer takes the instance out');
  await outage.up();
  let back = 0;
  for (let i = 0; i < 50 && back !== 200; i++) {
    back = (await call(s.url, 'GET', '/api/business', { token: u.token })).status;
    if (back !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(back, 200, 'served again once Redis answers');
});
