import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateToken, hashToken } from '../../src/core/auth/tokens.js';
import { isAppError } from '../../src/core/errors.js';
import type { AccountStore } from '../../src/sync/accounts/account-store.js';
import { issueBusinessToken } from '../../src/sync/accounts/business-token.js';
import { createKyselyAccountStore } from '../../src/sync/accounts/kysely-account-store.js';
import { TOKEN_PREFIX } from '../../src/sync/accounts/sessions.js';
import type { AccountTables } from '../../src/sync/accounts/tables.js';
import { authenticateAccessToken } from '../../src/sync/http/auth-guard.js';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { holdAfter } from '../helpers/pg-hold.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

/**
 * Revoking a session (a spent refresh token presented again, a logout) while
 * the same session gets a new token: the revocation must take the new token
 * with it. Each race is set up in one order every run, not left to chance:
 * one side is held at the point where it has checked but not yet written (on
 * every backend), or has written but not yet committed (PostgreSQL, where
 * READ COMMITTED lets a concurrent statement miss rows it did not see start);
 * there it waits until the other side is seen waiting on it or is done.
 */
function gate() {
  let reached!: () => void;
  let release!: () => void;
  const atGate = new Promise<void>((r) => { reached = r; });
  const released = new Promise<void>((r) => { release = r; });
  return { atGate, reached, release, released };
}

async function login(s: SyncUnderTest, u: { email: string; password: string }) {
  const r = await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } });
  assert.equal(r.status, 200, r.text);
  return { token: r.body.token as string, refreshToken: r.body.refresh_token as string };
}

for (const backend of BACKENDS) {
  describe(`sync session revocation racing a new token on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('logout while a business token of the session is being issued (checked, not yet stored): the token is refused (401) or revoked', async () => {
      const owner = await newUser(s);
      const biz = await newBusiness(s, owner);
      const session = await login(s, owner);
      const caller = await authenticateAccessToken(s.deps, session.token);
      assert.ok(caller);
      const g = gate();
      const accounts: AccountStore = {
        ...s.deps.accounts,
        saveAccessToken: async (...args) => { g.reached(); await g.released; return s.deps.accounts.saveAccessToken(...args); },
      };
      const issuing = issueBusinessToken({ ...s.deps, accounts }, caller, biz.id).then((t) => t.token, (e: unknown) => e);
      await g.atGate;
      assert.equal((await call(s.url, 'POST', '/api/auth/logout', { token: session.token })).status, 204);
      g.release();
      const issued = await issuing;
      if (typeof issued === 'string') {
        assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: issued })).status, 401, 'a business token issued to an ended session works');
      } else {
        assert.ok(isAppError(issued) && issued.code === 'unauthorized', String(issued));
      }
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { token: session.token, json: { business_id: biz.id } })).status, 401);
    });
  });
}

for (const backend of BACKENDS.filter((b) => b === 'postgres')) {
  describe(`sync session revocation racing an uncommitted new token on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    /** An account store whose transaction is held after its first INSERT into `table` while `during` runs (pg-hold.ts). */
    async function holdingAfterInsert<T>(table: keyof AccountTables, during: () => Promise<T>) {
      const held = await holdAfter(s.deps.database, { after: 'insert', table }, during);
      return { ...held, store: createKyselyAccountStore(held.db, 'postgres') };
    }

    /** R1 -> R2 through the API; R1 is spent. */
    async function rotatedOnce() {
      const u = await newUser(s);
      const r = await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: u.refreshToken } });
      assert.equal(r.status, 200, r.text);
      return { spent: u.refreshToken, current: r.body.refresh_token as string, access: r.body.token as string };
    }

    /** R2 -> R3 through `store`, with R3 and its access token known to the test. */
    async function rotate(store: AccountStore, current: string) {
      const now = s.clock.now();
      const next = { token: generateToken(TOKEN_PREFIX.user), refreshToken: generateToken(TOKEN_PREFIX.refresh) };
      const r = await store.rotateRefreshToken(hashToken(current), {
        accessHash: hashToken(next.token), accessExpiresAt: now + 900_000,
        refreshHash: hashToken(next.refreshToken), refreshExpiresAt: now + 86_400_000, sessionExpiresAt: now + 86_400_000, now,
      });
      return { outcome: r.outcome, ...next };
    }

    async function assertRevoked(next: { token: string; refreshToken: string }) {
      assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: next.refreshToken } })).status, 401, 'the refresh token of the concurrent rotation survived');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: next.token })).status, 401, 'the access token of the concurrent rotation survived');
    }

    test('a spent refresh token presented while the current one rotates (uncommitted): 401 and the rotation\'s new tokens are revoked too', async () => {
      const r = await rotatedOnce();
      const held = await holdingAfterInsert('refresh_tokens', () => call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: r.spent } }));
      try {
        const next = await rotate(held.store, r.current);
        assert.equal(next.outcome, 'rotated');
        const reuse = await held.outcome();
        assert.ok(reuse.waitedOn, 'the reuse waited on the rotation');
        assert.equal(reuse.answer.status, 401);
        await assertRevoked(next);
      } finally {
        await held.close();
      }
    });

    test('logout while the session\'s refresh token rotates (uncommitted): the rotation\'s new tokens are revoked too', async () => {
      const r = await rotatedOnce();
      const held = await holdingAfterInsert('refresh_tokens', () => call(s.url, 'POST', '/api/auth/logout', { token: r.access }));
      try {
        const next = await rotate(held.store, r.current);
        assert.equal(next.outcome, 'rotated');
        const logout = await held.outcome();
        assert.ok(logout.waitedOn, 'the logout waited on the rotation');
        assert.equal(logout.answer.status, 204);
        await assertRevoked(next);
      } finally {
        await held.close();
      }
    });

    test('a refresh that waits for a logout in progress gets 401 as revoked (not as a re-use) and adds nothing', async () => {
      const r = await rotatedOnce();
      const caller = await authenticateAccessToken(s.deps, r.access);
      assert.ok(caller?.familyId);
      const held = await holdAfter(s.deps.database, { after: 'select', table: 'users' },
        () => call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: r.current } }));
      try {
        await createKyselyAccountStore(held.db, 'postgres').revokeFamily(caller.userId, caller.familyId);
        const refresh = await held.outcome();
        assert.ok(refresh.waitedOn, 'the refresh waited on the logout');
        assert.equal(refresh.answer.status, 401);
        assert.doesNotMatch(refresh.answer.body.details, /already used/);
        const left = await s.deps.database.db.selectFrom('refresh_tokens').select('token_hash').where('family_id', '=', caller.familyId).execute();
        assert.deepEqual(left, []);
      } finally {
        await held.close();
      }
    });

    test('logout while a business token of the session is being stored (uncommitted): the token is revoked with the session', async () => {
      const owner = await newUser(s);
      const biz = await newBusiness(s, owner);
      const session = await login(s, owner);
      const caller = await authenticateAccessToken(s.deps, session.token);
      assert.ok(caller);
      const held = await holdingAfterInsert('access_tokens', () => call(s.url, 'POST', '/api/auth/logout', { token: session.token }));
      try {
        const issued = await issueBusinessToken({ ...s.deps, accounts: held.store }, caller, biz.id);
        const logout = await held.outcome();
        assert.equal(logout.answer.status, 204);
        assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: issued.token })).status, 401, 'a business token issued to an ended session works');
      } finally {
        await held.close();
      }
    });
  });
}
