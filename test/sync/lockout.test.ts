import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

const LOCK_MS = 15 * 60_000;

/** Status, body and Retry-After: everything a client can see of a login answer. */
function visible(r: Reply): unknown {
  return { status: r.status, body: r.body, retryAfter: r.headers.get('retry-after') };
}

for (const backend of BACKENDS) {
  describe(`sync login lockout on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    const login = (email: string, password: string) => call(s.url, 'POST', '/api/auth/login', { json: { email, password } });

    test('five failed logins lock the account: the right password is refused with 429 and retry_after', async () => {
      const u = await newUser(s);
      for (let i = 0; i < 5; i++) assert.equal((await login(u.email, `wrong password ${i}`)).status, 401, `failure ${i + 1}`);
      const r = await login(u.email, u.password);
      assert.equal(r.status, 429);
      assert.equal(r.body.error, 'rate_limited');
      assert.match(r.body.details, /failed logins/);
      assert.ok(r.body.retry_after > 14 * 60 && r.body.retry_after <= 15 * 60, `retry_after ${r.body.retry_after}`);
      assert.equal(r.headers.get('retry-after'), String(r.body.retry_after));
      assert.equal(r.body.token, undefined);
    });

    test('a lock holds back new sign-ins only: the owner\'s signed-in sessions go on, their tokens and refresh included', async () => {
      const u = await newUser(s);
      for (let i = 0; i < 5; i++) await login(u.email, 'wrong password');
      assert.equal((await login(u.email, u.password)).status, 429);
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200, 'the access token still works');
      const refreshed = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } });
      assert.equal(refreshed.status, 200, refreshed.text);
      assert.equal((await call(s.url, 'GET', '/api/business', { token: refreshed.body.token })).status, 200);
    });

    test('the lock lasts 15 minutes from the locking failure and attempts during it do not extend it', async () => {
      const u = await newUser(s);
      for (let i = 0; i < 5; i++) await login(u.email, 'wrong password');
      s.clock.advance(LOCK_MS - 60_000);
      assert.equal((await login(u.email, u.password)).status, 429, 'still locked a minute before the end');
      assert.equal((await login(u.email, 'wrong password')).status, 429);
      s.clock.advance(61_000);
      const r = await login(u.email, u.password);
      assert.equal(r.status, 200, 'unlocked after 15 minutes');
      assert.match(r.body.token, /^syu_/);
    });

    test('an unknown e-mail is answered exactly like a known one, failure by failure and through the lock', async (t) => {
      const u = await newUser(s);
      const unknown = 'never-registered@example.com';
      s.clock.freeze();
      t.after(() => s.clock.resume());
      for (let i = 0; i < 7; i++) {
        const known = visible(await login(u.email, 'wrong password'));
        const ghost = visible(await login(unknown, 'wrong password'));
        assert.deepEqual(ghost, known, `attempt ${i + 1}`);
      }
      const lockedKnown = visible(await login(u.email, u.password));
      const lockedGhost = visible(await login(unknown, u.password));
      assert.deepEqual(lockedGhost, lockedKnown);
    });

    test('a successful login clears the failures; locks are per e-mail address', async () => {
      const u = await newUser(s);
      const other = await newUser(s);
      for (let i = 0; i < 4; i++) await login(u.email, 'wrong password');
      assert.equal((await login(u.email, u.password)).status, 200);
      for (let i = 0; i < 4; i++) assert.equal((await login(u.email, 'wrong password')).status, 401, 'the count restarted');
      assert.equal((await login(u.email, u.password)).status, 200);
      for (let i = 0; i < 5; i++) await login(u.email, 'wrong password');
      assert.equal((await login(u.email.toUpperCase(), u.password)).status, 429, 'the lock ignores letter case');
      assert.equal((await login(other.email, other.password)).status, 200, 'another account is not locked');
    });

    test('failures count over the last 15 minutes, not in fixed windows: a window\'s end lets no second series of guesses through', async () => {
      const u = await newUser(s);
      assert.equal((await login(u.email, 'wrong password')).status, 401);
      s.clock.advance(LOCK_MS - 10_000);
      for (let i = 0; i < 3; i++) assert.equal((await login(u.email, 'wrong password')).status, 401, `failure ${i + 2}`);
      // The first failure has left the last 15 minutes; the three of 20 s ago have not. A window opened by the first
      // failure would have started over here and checked four more passwords.
      s.clock.advance(20_000);
      assert.equal((await login(u.email, 'wrong password')).status, 401, 'the 4th failure of the last 15 minutes');
      assert.equal((await login(u.email, 'wrong password')).status, 401, 'the 5th, which locks');
      assert.equal((await login(u.email, 'wrong password')).status, 429);
      assert.equal((await login(u.email, u.password)).status, 429, 'locked: the right password is refused too');
    });

    test('a lock does not end the sessions already open', async () => {
      const u = await newUser(s);
      for (let i = 0; i < 5; i++) await login(u.email, 'wrong password');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: u.token })).status, 200);
    });
  });
}
