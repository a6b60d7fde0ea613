import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { change, device } from './push-client.js';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

for (const backend of BACKENDS) {
  describe(`sync status on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('reports the server version and pending conflicts of the business', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const h = { 'x-business-id': b.id };
      let r = await call(s.url, 'GET', '/api/sync/status', { token: u.token, headers: h });
      assert.deepEqual(r.body, { business_id: b.id, server_version: 0, pending_conflicts: 0 });
      const rec = randomUUID();
      await device(s.url, u.token, b.id).push({ changes: [change(rec, 1), change(randomUUID(), 1)] });
      await device(s.url, u.token, b.id).push({ changes: [change(rec, 1, { other: 1 })] });
      r = await call(s.url, 'GET', '/api/sync/status', { token: await businessToken(s, u, b.id) });
      assert.deepEqual(r.body, { business_id: b.id, server_version: 2, pending_conflicts: 1 });
    });

    test('400 without a business, 401 without a token, 403 for a non-member, 404 for an unknown business', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const outsider = await newUser(s);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: u.token })).status, 400);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: u.token, headers: { 'x-business-id': 'nope' } })).status, 400);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { headers: { 'x-business-id': b.id } })).status, 401);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: outsider.token, headers: { 'x-business-id': b.id } })).status, 403);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: u.token, headers: { 'x-business-id': UNKNOWN } })).status, 404);
    });
  });
}
