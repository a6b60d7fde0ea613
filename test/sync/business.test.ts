import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

for (const backend of BACKENDS) {
  describe(`sync businesses on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('creating a business answers 201 with the business and makes the creator its owner', async () => {
      const u = await newUser(s);
      const r = await call(s.url, 'POST', '/api/business', { token: u.token, json: { name: '  Acme Pty Ltd ', abn: '51 824 753 556' } });
      assert.equal(r.status, 201, r.text);
      assert.match(r.body.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal(r.body.name, 'Acme Pty Ltd');
      assert.equal(r.body.abn, '51824753556');
      assert.equal(r.body.role, 'owner');
      assert.ok(!Number.isNaN(Date.parse(r.body.created_at)));
      const members = await call(s.url, 'GET', `/api/business/${r.body.id}/members`, { token: u.token });
      assert.deepEqual(members.body.map((m: { user_id: string; role: string }) => [m.user_id, m.role]), [[u.id, 'owner']]);
    });

    test('an abn that is not 11 digits or fails the checksum gets 400 and nothing is created', async () => {
      const u = await newUser(s);
      const cases: Array<[string, RegExp]> = [
        ['5182475355', /11 digits/],
        ['518247535567', /11 digits/],
        ['5182475355a', /11 digits/],
        ['', /11 digits/],
        ['51824753557', /checksum/],
        ['01824753556', /checksum/],
        ['11111111111', /checksum/],
      ];
      for (const [abn, reason] of cases) {
        const r = await call(s.url, 'POST', '/api/business', { token: u.token, json: { name: 'Bad', abn } });
        assert.equal(r.status, 400, abn);
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, reason);
      }
      assert.deepEqual((await call(s.url, 'GET', '/api/business', { token: u.token })).body, []);
    });

    test('a missing or empty name, a numeric abn or unknown fields get 400', async () => {
      const u = await newUser(s);
      for (const json of [{ abn: '51824753556' }, { name: ' ', abn: '51824753556' }, { name: 'N', abn: 51824753556 }, { name: 'N', abn: '51824753556', owner: 'x' }, { name: 'x'.repeat(201), abn: '51824753556' }]) {
        const r = await call(s.url, 'POST', '/api/business', { token: u.token, json });
        assert.equal(r.status, 400, JSON.stringify(json));
        assert.equal(r.body.error, 'invalid_request');
      }
    });

    test('the list holds only the caller\'s businesses, oldest first', async () => {
      const a = await newUser(s);
      const b = await newUser(s);
      const a1 = await newBusiness(s, a, { name: 'A one' });
      const a2 = await newBusiness(s, a, { name: 'A two' });
      await newBusiness(s, b, { name: 'B one' });
      const r = await call(s.url, 'GET', '/api/business', { token: a.token });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.map((x: { id: string }) => x.id), [a1.id, a2.id]);
      assert.deepEqual(Object.keys(r.body[0]).sort(), ['abn', 'created_at', 'id', 'name', 'role']);
    });

    test('GET one business: 200 for a member, 403 for another user\'s business, 404 unknown, 400 malformed', async () => {
      const owner = await newUser(s);
      const other = await newUser(s);
      const biz = await newBusiness(s, owner);
      const ok = await call(s.url, 'GET', `/api/business/${biz.id.toUpperCase()}`, { token: owner.token });
      assert.equal(ok.status, 200);
      assert.deepEqual({ id: ok.body.id, name: ok.body.name, abn: ok.body.abn, role: ok.body.role }, { id: biz.id, name: biz.name, abn: biz.abn, role: 'owner' });
      const forbidden = await call(s.url, 'GET', `/api/business/${biz.id}`, { token: other.token });
      assert.equal(forbidden.status, 403);
      assert.equal(forbidden.body.error, 'forbidden');
      const missing = await call(s.url, 'GET', `/api/business/${UNKNOWN}`, { token: other.token });
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error, 'not_found');
      for (const bad of ['123', 'not-a-uuid', '%27%20or%201%3D1', '..%2F..%2Fetc']) {
        const r = await call(s.url, 'GET', `/api/business/${bad}`, { token: owner.token });
        assert.ok(r.status === 400 || r.status === 404, `${bad}: ${r.status}`);
        assert.ok(r.body.error);
      }
      assert.equal((await call(s.url, 'GET', '/api/business/not-a-uuid', { token: owner.token })).status, 400);
    });

    test('business endpoints need a token (401)', async () => {
      assert.equal((await call(s.url, 'GET', '/api/business')).status, 401);
      assert.equal((await call(s.url, 'POST', '/api/business', { json: { name: 'N', abn: '51824753556' } })).status, 401);
      assert.equal((await call(s.url, 'GET', `/api/business/${UNKNOWN}`)).status, 401);
    });
  });
}
