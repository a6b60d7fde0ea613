import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { SHARED_STATES, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { loadSyncConfig } from '../../src/sync/config.js';
import { SECURITY_HEADERS } from '../../src/core/http/security-headers.js';

function assertRateLimited(r: Reply, what: string): void {
  assert.equal(r.status, 429, what);
  assert.equal(r.body.error, 'rate_limited');
  assert.ok(Number.isInteger(r.body.retry_after) && r.body.retry_after >= 1 && r.body.retry_after <= 60, `retry_after ${r.body.retry_after}`);
  assert.equal(r.headers.get('retry-after'), String(r.body.retry_after));
  for (const [h, v] of Object.entries(SECURITY_HEADERS)) assert.equal(r.headers.get(h), v, h);
}

test('the default limits are the specification\'s: 100/min per user, 20/min per IP, 5 failures lock for 15 minutes', () => {
  const c = loadSyncConfig();
  assert.deepEqual([c.userRateLimit, c.ipRateLimit, c.lockoutThreshold, c.lockoutSeconds, c.accessTokenTtlSeconds], [100, 20, 5, 900, 900]);
  const raised = loadSyncConfig({ argv: ['--user-rate-limit', '1000', '--ip-rate-limit', '50'], env: { SYNC_LOCKOUT_THRESHOLD: '3' } });
  assert.deepEqual([raised.userRateLimit, raised.ipRateLimit, raised.lockoutThreshold], [1000, 50, 3]);
  assert.throws(() => loadSyncConfig({ argv: ['--user-rate-limit', '0'] }), /user-rate-limit/);
});

for (const backend of BACKENDS) for (const shared of SHARED_STATES) {
  describe(`sync per-user rate limit on ${backend}, counters in ${shared}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { userRateLimit: 5 }, { shared }); });
    after(() => s.close());

    test('an authenticated user past the per-minute limit gets 429 with retry_after and Retry-After; others are unaffected', async () => {
      const a = await newUser(s);
      const b = await newUser(s);
      for (let i = 0; i < 5; i++) assert.equal((await call(s.url, 'GET', '/api/business', { token: a.token })).status, 200, `request ${i + 1}`);
      assertRateLimited(await call(s.url, 'GET', '/api/business', { token: a.token }), 'sixth request');
      assertRateLimited(await call(s.url, 'POST', '/api/business', { token: a.token, json: { name: 'x', abn: '51824753556' } }), 'any endpoint');
      assertRateLimited(await call(s.url, 'POST', '/api/auth/token', { token: a.token, json: { business_id: randomUUID() } }), 'a business token');
      // The feed's upgrade too, refused before it becomes a WebSocket.
      const upgrade = await new Promise<{ status: number; retryAfter: string | undefined; body: string }>((resolve, reject) => {
        const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws/sync?business_id=${randomUUID()}&user_id=${a.id}`, { headers: { authorization: `Bearer ${a.token}` } });
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => { body += String(c); });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body }));
        });
        ws.once('open', () => { ws.close(); reject(new Error('the upgrade was accepted')); });
        ws.once('error', () => undefined);
      });
      assert.deepEqual([upgrade.status, JSON.parse(upgrade.body).error], [429, 'rate_limited'], 'the feed upgrade');
      assert.ok(Number(upgrade.retryAfter) >= 1, `Retry-After: ${upgrade.retryAfter}`);
      assert.deepEqual((await call(s.url, 'GET', '/api/business', { token: a.token })).body.error, 'rate_limited');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: b.token })).status, 200, 'another user has their own budget');
      await s.nextMinute();
      assert.equal((await call(s.url, 'GET', '/api/business', { token: a.token })).status, 200, 'the next minute is allowed again');
    });

    test('all tokens of one user share the budget', async () => {
      const a = await newUser(s);
      const second = await call(s.url, 'POST', '/api/auth/login', { json: { email: a.email, password: a.password } });
      for (let i = 0; i < 5; i++) await call(s.url, 'GET', '/api/business', { token: i % 2 ? a.token : second.body.token });
      assertRateLimited(await call(s.url, 'GET', '/api/business', { token: second.body.token }), 'second token');
    });
  });

  describe(`sync per-IP rate limit on ${backend}, counters in ${shared}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { ipRateLimit: 4 }, { shared }); });
    after(() => s.close());

    test('unauthenticated requests past the per-IP limit get 429, even with valid credentials or a bad body', async () => {
      await s.nextMinute();
      const u = await newUser(s);
      await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: 'wrong password' } });
      await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: 'syr_nothing' } });
      await call(s.url, 'POST', '/api/auth/login', { body: '{not json', headers: { 'content-type': 'application/json' } });
      assertRateLimited(await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } }), 'login');
      assertRateLimited(await call(s.url, 'POST', '/api/auth/register', { json: { email: 'late@example.com', name: 'L', password: 'long enough password' } }), 'register');
      assertRateLimited(await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } }), 'refresh');
      assertRateLimited(await call(s.url, 'GET', '/api/business', { token: 'syu_guessing_tokens_0000000000' }), 'a bad token');
      assertRateLimited(await call(s.url, 'GET', '/api/business'), 'no token');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200, 'authenticated requests use the per-user budget');
      await s.nextMinute();
      assert.equal((await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } })).status, 200, 'the next minute is allowed again');
    });

    test('authenticated requests do not consume the per-IP budget', async () => {
      await s.nextMinute();
      const u = await newUser(s);
      for (let i = 0; i < 10; i++) assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200);
      assert.equal((await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } })).status, 200);
    });
  });
}
