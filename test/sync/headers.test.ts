import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

/** The specification's five headers, spelled out here rather than imported, so a change to the core is caught. */
const REQUIRED = {
  'strict-transport-security': 'max-age=31536000',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'x-xss-protection': '1; mode=block',
  'content-security-policy': "default-src 'self'",
};

function assertHeaders(r: Reply, what: string): void {
  for (const [h, v] of Object.entries(REQUIRED)) assert.equal(r.headers.get(h), v, `${what}: ${h}`);
}

for (const backend of BACKENDS) {
  describe(`sync security headers on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { userRateLimit: 30, ipRateLimit: 10 }); });
    after(() => s.close());

    test('every kind of answer carries the five security headers: 200, 201, 204, 400, 401, 403, 404, 409, 413, 415, 429', async () => {
      const owner = await newUser(s);
      const other = await newUser(s);
      const biz = await newBusiness(s, owner);
      const seen = new Map<number, Reply>();
      const record = (r: Reply) => { seen.set(r.status, r); return r; };
      record(await call(s.url, 'GET', '/api/business', { token: owner.token }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name: 'N', abn: '51824753556' } }));
      record(await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: other.email } }));
      record(await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${other.id}`, { token: owner.token }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name: 'N', abn: '1' } }));
      record(await call(s.url, 'GET', '/api/business'));
      record(await call(s.url, 'GET', `/api/business/${biz.id}`, { token: other.token }));
      record(await call(s.url, 'GET', '/no/such/route'));
      record(await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${owner.id}`, { token: owner.token }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name: 'x'.repeat(2_000_000), abn: '1' } }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, body: 'name=x', headers: { 'content-type': 'text/plain' } }));
      record(await call(s.url, 'GET', '/api/openapi.json'));
      for (let i = 0; i < 12; i++) record(await call(s.url, 'POST', '/api/auth/login', { json: { email: owner.email, password: 'wrong password' } }));
      assert.deepEqual([...seen.keys()].sort((a, b) => a - b), [200, 201, 204, 400, 401, 403, 404, 409, 413, 415, 429]);
      for (const [status, r] of seen) assertHeaders(r, String(status));
    });
  });
}
