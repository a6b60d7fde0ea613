import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

for (const backend of BACKENDS) {
  describe(`sync auth on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('register answers 201 with a user token, a refresh token, its expiry and the user', async () => {
      const r = await call(s.url, 'POST', '/api/auth/register', { json: { email: 'Ada@Example.com', name: 'Ada', password: 'correct horse battery' } });
      assert.equal(r.status, 201, r.text);
      assert.match(r.body.token, /^syu_/);
      assert.match(r.body.refresh_token, /^syr_/);
      assert.match(r.body.expires_at, ISO);
      const ttl = Date.parse(r.body.expires_at) - s.clock.now();
      assert.ok(ttl > 14 * 60_000 && ttl <= 15 * 60_000, `access token lives 15 minutes, got ${ttl} ms`);
      // The same lifetime in seconds from the answer, for a client whose clock is not the server's.
      assert.ok(Number.isInteger(r.body.expires_in) && r.body.expires_in >= 14 * 60 && r.body.expires_in <= 15 * 60, `expires_in ${r.body.expires_in}`);
      assert.deepEqual(Object.keys(r.body.user).sort(), ['email', 'id', 'name']);
      assert.equal(r.body.user.email, 'ada@example.com');
      assert.equal(r.body.user.name, 'Ada');
      const me = await call(s.url, 'GET', '/api/business', { token: r.body.token });
      assert.equal(me.status, 200);
    });

    test('register rejects an invalid e-mail format with 400 {error, details}', async () => {
      for (const email of ['not-an-email', 'a@b', 'a b@example.com', '@example.com', 'a@.com', 'a..b@example.com', '', 'x'.repeat(300) + '@example.com']) {
        const r = await call(s.url, 'POST', '/api/auth/register', { json: { email, name: 'X', password: 'long enough password' } });
        assert.equal(r.status, 400, email);
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, /email/);
      }
    });

    test('login rejects an invalid e-mail format with 400, as register does', async () => {
      for (const email of ['not-an-email', 'a@b', '', 'x'.repeat(300) + '@example.com']) {
        const r = await call(s.url, 'POST', '/api/auth/login', { json: { email, password: 'long enough password' } });
        assert.equal(r.status, 400, email);
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, /email/);
      }
    });

    test('register enforces the password policy with 400 and a reason', async () => {
      const cases: Array<[string, RegExp]> = [
        ['short', /at least 10/],
        ['x'.repeat(201), /at most 200/],
        ['          ', /whitespace/],
        ['aaaaaaaaaaaa', /repeated/],
        ['policy@example.com', /e-mail/],
        ['password12', /too common/],
        ['Password123', /too common/],
        ['qwertyuiop', /too common/],
        ['1234567890', /too common/],
      ];
      for (const [password, reason] of cases) {
        const r = await call(s.url, 'POST', '/api/auth/register', { json: { email: 'policy@example.com', name: 'P', password } });
        assert.equal(r.status, 400, password);
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, reason);
      }
      const ok = await call(s.url, 'POST', '/api/auth/register', { json: { email: 'policy@example.com', name: 'P', password: 'ünïcödé pässwörd' } });
      assert.equal(ok.status, 201);
    });

    test('register rejects missing fields, extra fields, wrong types and an empty name with 400', async () => {
      const bodies = [
        { email: 'm@example.com', password: 'long enough password' },
        { email: 'm@example.com', name: 'M', password: 'long enough password', admin: true },
        { email: 'm@example.com', name: 'M', password: 1234567890123 },
        { email: 'm@example.com', name: '   ', password: 'long enough password' },
      ];
      for (const json of bodies) {
        const r = await call(s.url, 'POST', '/api/auth/register', { json });
        assert.equal(r.status, 400, JSON.stringify(json));
        assert.equal(r.body.error, 'invalid_request');
        assert.ok(r.body.details);
      }
    });

    test('an e-mail already registered, in any letter case, gets 409', async () => {
      const u = await newUser(s);
      const r = await call(s.url, 'POST', '/api/auth/register', { json: { email: u.email.toUpperCase(), name: 'Other', password: 'another long password' } });
      assert.equal(r.status, 409);
      assert.equal(r.body.error, 'conflict');
      assert.ok(r.body.details);
    });

    test('two concurrent registrations of one e-mail: exactly one wins', async () => {
      const json = { email: 'race@example.com', name: 'R', password: 'racing password' };
      const rs = await Promise.all([1, 2, 3].map(() => call(s.url, 'POST', '/api/auth/register', { json })));
      assert.deepEqual(rs.map((r) => r.status).sort(), [201, 409, 409]);
    });

    test('login returns a new token pair and the user; e-mail is case-insensitive', async () => {
      const u = await newUser(s);
      const r = await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email.toUpperCase(), password: u.password } });
      assert.equal(r.status, 200, r.text);
      assert.match(r.body.token, /^syu_/);
      assert.match(r.body.refresh_token, /^syr_/);
      assert.match(r.body.expires_at, ISO);
      assert.ok(r.body.expires_in === 900 || r.body.expires_in === 899, `expires_in ${r.body.expires_in}`);
      assert.deepEqual(r.body.user, { id: u.id, email: u.email, name: u.name });
      assert.notEqual(r.body.token, u.token);
    });

    test('a wrong password and an unknown e-mail get the identical 401', async () => {
      const u = await newUser(s);
      const wrong = await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: 'not the password' } });
      const unknown = await call(s.url, 'POST', '/api/auth/login', { json: { email: 'nobody-here@example.com', password: 'not the password' } });
      assert.equal(wrong.status, 401);
      assert.equal(unknown.status, 401);
      assert.deepEqual(wrong.body, unknown.body);
      assert.deepEqual(wrong.body, { error: 'unauthorized', details: 'the e-mail address or the password is incorrect' });
    });

    test('requests without a token, with a malformed or an unknown token get 401', async () => {
      for (const headers of <Record<string, string>[]>[{}, { authorization: 'Basic abc' }, { authorization: 'Bearer syu_doesnotexist_at_all_0000000000000000000' }, { authorization: 'Bearer ' }]) {
        const r = await call(s.url, 'GET', '/api/business', { headers });
        assert.equal(r.status, 401, JSON.stringify(headers));
        assert.equal(r.body.error, 'unauthorized');
      }
    });

    test('an access token stops working once it expires (15 minutes)', async () => {
      const u = await newUser(s);
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200);
      s.clock.advance(15 * 60_000 + 1000);
      try {
        const r = await call(s.url, 'GET', '/api/business', { token: u.token });
        assert.equal(r.status, 401);
      } finally {
        s.clock.advance(-(15 * 60_000 + 1000));
      }
    });

    test('passwords are stored as scrypt hashes and tokens only as SHA-256 hashes', async () => {
      const u = await newUser(s);
      const db = s.deps.database.db;
      const user = await db.selectFrom('users').select('password_hash').where('id', '=', u.id).executeTakeFirstOrThrow();
      assert.match(user.password_hash, /^scrypt\$\d+\$8\$3\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
      assert.ok(!user.password_hash.includes(u.password));
      const dump = JSON.stringify([
        (await sql`select * from access_tokens`.execute(db)).rows,
        (await sql`select * from refresh_tokens`.execute(db)).rows,
      ]);
      assert.ok(!dump.includes(u.token) && !dump.includes(u.token.slice(4)), 'access token stored in clear');
      assert.ok(!dump.includes(u.refreshToken) && !dump.includes(u.refreshToken.slice(4)), 'refresh token stored in clear');
    });

    test('a session has an absolute lifetime: refreshing never extends it past --session-max-age', async (t) => {
      const own = await startSync(backend, { sessionMaxAgeSeconds: 3600, refreshTokenTtlSeconds: 3000 });
      t.after(() => own.close());
      const u = await newUser(own);
      let refreshToken = u.refreshToken;
      const refresh = () => call(own.url, 'POST', '/api/auth/refresh', { json: { refresh_token: refreshToken } });
      own.clock.advance(2000_000);
      const first = await refresh();
      assert.equal(first.status, 200, 'within both lifetimes');
      refreshToken = first.body.refresh_token;
      own.clock.advance(1000_000);
      const second = await refresh();
      assert.equal(second.status, 200, 'the sliding lifetime alone would allow refreshing until 5000 s');
      refreshToken = second.body.refresh_token;
      own.clock.advance(700_000);
      const late = await refresh();
      assert.equal(late.status, 401, '3700 s after the login the session is over, however recently it was refreshed');
      assert.match(late.body.details, /maximum age/);
      const login = await call(own.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } });
      assert.equal(login.status, 200, 'signing in again starts a new session');
    });

    test('refresh rotates: a new token and refresh token, and the new ones work', async () => {
      const u = await newUser(s);
      const r = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(Object.keys(r.body).sort(), ['expires_at', 'expires_in', 'refresh_token', 'token']);
      assert.ok(r.body.expires_in === 900 || r.body.expires_in === 899, `expires_in ${r.body.expires_in}`);
      assert.notEqual(r.body.refresh_token, u.refreshToken);
      assert.match(r.body.expires_at, ISO);
      assert.equal((await call(s.url, 'GET', '/api/business', { token: r.body.token })).status, 200);
      const again = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: r.body.refresh_token } });
      assert.equal(again.status, 200);
    });

    test('re-using a rotated refresh token revokes its whole family, access tokens included', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const bizToken = await businessToken(s, u, b.id);
      const first = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } });
      assert.equal(first.status, 200);
      const replay = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } });
      assert.equal(replay.status, 401);
      assert.match(replay.body.details, /already used/);
      assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: first.body.refresh_token } })).status, 401, 'the successor refresh token is revoked');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: first.body.token })).status, 401, 'the successor access token is revoked');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 401, 'the original access token is revoked');
      assert.equal((await call(s.url, 'GET', '/api/business/' + b.id, { token: bizToken, headers: {} })).status, 401, 'business tokens of the family are revoked');
      const other = await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } });
      assert.equal((await call(s.url, 'GET', '/api/business', { token: other.body.token })).status, 200, 'a new login still works');
    });

    test('concurrent exchanges of one refresh token: at most one succeeds and the family is revoked', async () => {
      const u = await newUser(s);
      const rs = await Promise.all([1, 2].map(() => call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } })));
      const statuses = rs.map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, 401]);
      const winner = rs.find((r) => r.status === 200)!;
      assert.equal((await call(s.url, 'GET', '/api/business', { token: winner.body.token })).status, 401);
    });

    test('an unknown, malformed or expired refresh token gets 401', async () => {
      for (const refresh_token of ['syr_unknown', 'x']) {
        const r = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token } });
        assert.equal(r.status, 401);
        assert.equal(r.body.error, 'unauthorized');
      }
      assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: {} })).status, 400);
      const u = await newUser(s);
      s.clock.advance(31 * 86_400_000);
      try {
        assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } })).status, 401);
      } finally {
        s.clock.advance(-31 * 86_400_000);
      }
    });

    test('business token: a member gets a business-scoped token with expires_at', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const r = await call(s.url, 'POST', '/api/auth/token', { token: u.token, json: { business_id: b.id.toUpperCase() } });
      assert.equal(r.status, 200, r.text);
      assert.match(r.body.token, /^syb_/);
      assert.match(r.body.expires_at, ISO);
      assert.ok(r.body.expires_in === 900 || r.body.expires_in === 899, `expires_in ${r.body.expires_in}`);
      assert.equal(r.body.business_id, b.id);
    });

    test('business token: a non-member gets 403, an unknown business 404, a malformed id 400, no token 401', async () => {
      const owner = await newUser(s);
      const outsider = await newUser(s);
      const b = await newBusiness(s, owner);
      const r = await call(s.url, 'POST', '/api/auth/token', { token: outsider.token, json: { business_id: b.id } });
      assert.equal(r.status, 403);
      assert.equal(r.body.error, 'forbidden');
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { token: outsider.token, json: { business_id: '00000000-0000-4000-8000-000000000000' } })).status, 404);
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { token: outsider.token, json: { business_id: 'not-a-uuid' } })).status, 400);
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { json: { business_id: b.id } })).status, 401);
    });

    test('a business-scoped token cannot manage accounts or businesses (403)', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const t = await businessToken(s, u, b.id);
      for (const [method, path, json] of [
        ['GET', '/api/business', undefined],
        ['GET', `/api/business/${b.id}`, undefined],
        ['POST', '/api/business', { name: 'X', abn: '51824753556' }],
        ['POST', '/api/auth/token', { business_id: b.id }],
        ['GET', `/api/business/${b.id}/members`, undefined],
        ['POST', `/api/business/${b.id}/members`, { email: 'someone@example.com' }],
        ['DELETE', `/api/business/${b.id}/members/${u.id}`, undefined],
        ['POST', '/api/auth/logout', undefined],
      ] as const) {
        const r = await call(s.url, method, path, { token: t, ...(json ? { json } : {}) });
        assert.equal(r.status, 403, `${method} ${path}`);
        assert.match(r.body.details, /user token/);
      }
    });

    test('logout revokes the session: its access, refresh and business tokens', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const t = await businessToken(s, u, b.id);
      const r = await call(s.url, 'POST', '/api/auth/logout', { token: u.token });
      assert.equal(r.status, 204);
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 401);
      assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } })).status, 401);
      assert.equal((await call(s.url, 'POST', '/api/auth/logout', { token: t })).status, 401);
    });
  });
}
