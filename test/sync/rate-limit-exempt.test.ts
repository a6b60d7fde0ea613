import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { SHARED_STATES, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { requireUser } from '../../src/sync/http/auth-guard.js';

const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

for (const backend of BACKENDS) for (const shared of SHARED_STATES) {
  describe(`routes exempt from rate limits on ${backend}, counters in ${shared}`, () => {
    let s: SyncUnderTest;
    before(async () => {
      s = await startSync(backend, { userRateLimit: 3, ipRateLimit: 2, metricsToken: METRICS_TOKEN }, {
        shared,
        // An authenticated route that opts out of the limits, as an operations endpoint would.
        extraRoutes: (app, deps) => app.get('/test/exempt', { config: { rateLimit: false }, preHandler: requireUser(deps) }, async () => ({ ok: true })),
      });
    });
    after(() => s.close());

    test('a route with config rateLimit: false is neither counted nor refused; the others still are', async () => {
      const u = await newUser(s);
      for (let i = 0; i < 10; i++) assert.equal((await call(s.url, 'GET', '/test/exempt', { token: u.token })).status, 200, `exempt request ${i + 1}`);
      for (let i = 0; i < 3; i++) assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200, 'the exempt requests used none of the budget');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 429);
      assert.equal((await call(s.url, 'GET', '/test/exempt', { token: u.token })).status, 200, 'still answered past the limit');
    });

    test('probes and /metrics keep answering a client whose per-IP budget is spent', async () => {
      for (let i = 0; i < 3; i++) await call(s.url, 'GET', '/api/business', { token: 'syu_guessing_0000000000000000' });
      assert.equal((await call(s.url, 'GET', '/api/business')).status, 429);
      assert.equal((await call(s.url, 'GET', '/test/exempt', { token: 'syu_guessing_0000000000000000' })).status, 401, 'a bad token on an exempt route is refused, never throttled');
      for (let i = 0; i < 5; i++) {
        assert.equal((await call(s.url, 'GET', '/healthz')).status, 200);
        assert.equal((await call(s.url, 'GET', '/readyz')).status, 200);
        assert.equal((await call(s.url, 'GET', '/metrics', { token: METRICS_TOKEN })).status, 200);
      }
    });
  });
}
