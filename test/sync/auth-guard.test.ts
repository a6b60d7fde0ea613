import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Type } from 'typebox';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { authenticateAccessToken, isMember, requireUser, resolveBusiness } from '../../src/sync/http/auth-guard.js';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

/** The guard contract the sync endpoints build on, exercised through a probe route. */
for (const backend of BACKENDS) {
  describe(`sync auth guard on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => {
      s = await startSync(backend, {}, {
        extraRoutes(app, deps) {
          app.post('/probe', {
            onRequest: requireUser(deps),
            schema: { body: Type.Object({ business_id: Type.Optional(Type.String()) }) },
          }, async (req) => ({ business_id: await resolveBusiness(req, deps, req.body.business_id), kind: req.caller.tokenKind }));
        },
      });
    });
    after(() => s.close());

    const probe = (opts: { token?: string; header?: string; body?: string }) =>
      call(s.url, 'POST', '/probe', {
        ...(opts.token ? { token: opts.token } : {}),
        headers: opts.header === undefined ? {} : { 'x-business-id': opts.header },
        json: opts.body === undefined ? {} : { business_id: opts.body },
      });

    test('a user token names the business with X-Business-ID', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const r = await probe({ token: u.token, header: b.id.toUpperCase() });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body, { business_id: b.id, kind: 'user' });
    });

    test('a business-scoped token carries its business; the header may repeat it but not contradict it', async () => {
      const u = await newUser(s);
      const b1 = await newBusiness(s, u);
      const b2 = await newBusiness(s, u);
      const t = await businessToken(s, u, b1.id);
      assert.deepEqual((await probe({ token: t })).body, { business_id: b1.id, kind: 'business' });
      assert.equal((await probe({ token: t, header: b1.id })).status, 200);
      const r = await probe({ token: t, header: b2.id });
      assert.equal(r.status, 400);
      assert.match(r.body.details, /disagrees/);
    });

    test('a user token without X-Business-ID, or with a malformed one, gets 400', async () => {
      const u = await newUser(s);
      const missing = await probe({ token: u.token });
      assert.equal(missing.status, 400);
      assert.match(missing.body.details, /X-Business-ID/);
      for (const header of ['nope', '1234', `${UNKNOWN}x`, "' or 1=1 --"]) {
        const r = await probe({ token: u.token, header });
        assert.equal(r.status, 400, header);
        assert.equal(r.body.error, 'invalid_request');
      }
    });

    test('a body business_id that disagrees with the request\'s business gets 400; one that agrees passes', async () => {
      const u = await newUser(s);
      const b1 = await newBusiness(s, u);
      const b2 = await newBusiness(s, u);
      const t = await businessToken(s, u, b1.id);
      assert.equal((await probe({ token: u.token, header: b1.id, body: b2.id })).status, 400);
      assert.equal((await probe({ token: t, body: b2.id })).status, 400);
      assert.equal((await probe({ token: u.token, header: b1.id, body: 'garbage' })).status, 400);
      assert.equal((await probe({ token: u.token, header: b1.id, body: b1.id.toUpperCase() })).status, 200);
    });

    test('an unknown business gets 404, another user\'s business 403, no token 401', async () => {
      const owner = await newUser(s);
      const outsider = await newUser(s);
      const b = await newBusiness(s, owner);
      assert.equal((await probe({ token: outsider.token, header: UNKNOWN })).status, 404);
      const r = await probe({ token: outsider.token, header: b.id });
      assert.equal(r.status, 403);
      assert.equal(r.body.error, 'forbidden');
      assert.equal((await probe({ header: b.id })).status, 401);
    });

    test('membership is checked on every request: a business token of a user no longer a member gets 403 at once; a removal also revokes it (401)', async () => {
      const owner = await newUser(s);
      const m = await newUser(s);
      const gone = await newUser(s);
      const b = await newBusiness(s, owner);
      await addMember(s, owner, b.id, m);
      await addMember(s, owner, b.id, gone);
      const t = await businessToken(s, m, b.id);
      const goneToken = await businessToken(s, gone, b.id);
      assert.equal((await probe({ token: t })).status, 200);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${b.id}/members/${m.id}`, { token: owner.token })).status, 204);
      assert.equal((await probe({ token: t })).status, 401);
      assert.equal((await probe({ token: m.token, header: b.id })).status, 403);
      // The membership row alone gone (the token kept): the per-request read refuses it.
      await s.deps.database.db.deleteFrom('memberships').where('business_id', '=', b.id).where('user_id', '=', gone.id).execute();
      assert.equal((await probe({ token: goneToken })).status, 403);
    });

    test('authenticateAccessToken resolves valid tokens of both kinds and nothing else; isMember reads memberships', async () => {
      const u = await newUser(s);
      const other = await newUser(s);
      const b = await newBusiness(s, u);
      const t = await businessToken(s, u, b.id);
      const userCaller = await authenticateAccessToken(s.deps, u.token);
      assert.equal(userCaller?.userId, u.id);
      assert.equal(userCaller?.tokenKind, 'user');
      assert.equal(userCaller?.businessId, undefined);
      const bizCaller = await authenticateAccessToken(s.deps, t);
      assert.deepEqual([bizCaller?.userId, bizCaller?.tokenKind, bizCaller?.businessId], [u.id, 'business', b.id]);
      assert.equal(await authenticateAccessToken(s.deps, u.refreshToken), undefined, 'a refresh token is not an access token');
      assert.equal(await authenticateAccessToken(s.deps, 'syu_nonsense'), undefined);
      assert.equal(await isMember(s.deps, u.id, b.id), true);
      assert.equal(await isMember(s.deps, other.id, b.id), false);
      s.clock.advance(16 * 60_000);
      try {
        assert.equal(await authenticateAccessToken(s.deps, t), undefined, 'expired');
      } finally {
        s.clock.advance(-16 * 60_000);
      }
    });
  });
}
