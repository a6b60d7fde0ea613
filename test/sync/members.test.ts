import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CompiledQuery, sql } from 'kysely';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { isAppError } from '../../src/core/errors.js';
import type { BusinessStore } from '../../src/sync/businesses/business-store.js';
import * as members from '../../src/sync/businesses/members.js';
import { createKyselyBusinessStore } from '../../src/sync/businesses/kysely-business-store.js';
import { holdAfter } from '../helpers/pg-hold.js';
import type { AccountStore } from '../../src/sync/accounts/account-store.js';
import { issueBusinessToken } from '../../src/sync/accounts/business-token.js';
import { createKyselyAccountStore } from '../../src/sync/accounts/kysely-account-store.js';
import { authenticateAccessToken } from '../../src/sync/http/auth-guard.js';
import { createGroupApplier, type Exec } from '../../src/sync/changes/push-apply.js';
import { validatePushItems } from '../../src/sync/changes/push-validation.js';
import { change, device } from './push-client.js';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

/**
 * The business store, with `method` held after the caller's ownership was checked and before the store writes,
 * until `release`: a removal of the caller is then run in between every time, not by chance.
 */
function holding(store: BusinessStore, method: 'addMember' | 'removeMember') {
  let reached!: () => void;
  let release!: () => void;
  const atGate = new Promise<void>((r) => { reached = r; });
  const released = new Promise<void>((r) => { release = r; });
  const held: BusinessStore = {
    ...store,
    [method]: async (...args: unknown[]) => { reached(); await released; return (store[method] as (...a: unknown[]) => Promise<unknown>)(...args); },
  };
  return { store: held, atGate, release };
}

const forbidden = (e: unknown) => isAppError(e) && e.code === 'forbidden';

/** An owner's business with one member, and that member as the domain functions see a caller. */
async function memberAsCaller(s: SyncUnderTest) {
  const owner = await newUser(s);
  const member = await newUser(s);
  const biz = await newBusiness(s, owner);
  await addMember(s, owner, biz.id, member);
  const caller = await authenticateAccessToken(s.deps, member.token);
  assert.ok(caller);
  return { owner, member, biz, caller };
}

for (const backend of BACKENDS) {
  describe(`sync business members on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('an owner adds a registered user by e-mail (201); the new member sees the business', async () => {
      const owner = await newUser(s);
      const bob = await newUser(s, { name: 'Bob' });
      const biz = await newBusiness(s, owner);
      const r = await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: bob.email.toUpperCase() } });
      assert.equal(r.status, 201, r.text);
      assert.deepEqual({ ...r.body, added_at: undefined }, { user_id: bob.id, email: bob.email, name: 'Bob', role: 'member', added_at: undefined });
      const list = await call(s.url, 'GET', '/api/business', { token: bob.token });
      assert.deepEqual(list.body.map((b: { id: string; role: string }) => [b.id, b.role]), [[biz.id, 'member']]);
      assert.equal((await call(s.url, 'GET', `/api/business/${biz.id}`, { token: bob.token })).status, 200);
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { token: bob.token, json: { business_id: biz.id } })).status, 200);
    });

    test('any member lists the members in joining order; outsiders get 403, unknown business 404', async () => {
      const owner = await newUser(s);
      const m1 = await newUser(s);
      const outsider = await newUser(s);
      const biz = await newBusiness(s, owner);
      await addMember(s, owner, biz.id, m1);
      const r = await call(s.url, 'GET', `/api/business/${biz.id}/members`, { token: m1.token });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.map((m: { user_id: string; role: string }) => [m.user_id, m.role]), [[owner.id, 'owner'], [m1.id, 'member']]);
      assert.deepEqual(Object.keys(r.body[0]).sort(), ['added_at', 'email', 'name', 'role', 'user_id']);
      assert.equal((await call(s.url, 'GET', `/api/business/${biz.id}/members`, { token: outsider.token })).status, 403);
      assert.equal((await call(s.url, 'GET', `/api/business/${UNKNOWN}/members`, { token: outsider.token })).status, 404);
      assert.equal((await call(s.url, 'GET', '/api/business/nope/members', { token: outsider.token })).status, 400);
    });

    test('adding: unknown e-mail 404, already a member 409, invalid e-mail or role 400', async () => {
      const owner = await newUser(s);
      const m = await newUser(s);
      const biz = await newBusiness(s, owner);
      await addMember(s, owner, biz.id, m);
      const unknown = await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: 'no-such-user@example.com' } });
      assert.equal(unknown.status, 404);
      assert.match(unknown.body.details, /register/);
      const dup = await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: m.email } });
      assert.equal(dup.status, 409);
      assert.equal(dup.body.error, 'conflict');
      assert.equal((await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: 'bad' } })).status, 400);
      assert.equal((await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: m.email, role: 'admin' } })).status, 400);
      assert.equal((await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: {} })).status, 400);
      const nobody = await call(s.url, 'POST', `/api/business/${randomUUID()}/members`, { token: owner.token, json: { email: m.email } });
      assert.deepEqual([nobody.status, nobody.body.details], [404, 'no such business']);
      const malformed = await call(s.url, 'POST', '/api/business/not-a-uuid/members', { token: owner.token, json: { email: m.email } });
      assert.deepEqual([malformed.status, malformed.body.error], [400, 'invalid_request']);
      const removeMalformed = await call(s.url, 'DELETE', `/api/business/not-a-uuid/members/${m.id}`, { token: owner.token });
      assert.deepEqual([removeMalformed.status, removeMalformed.body.error], [400, 'invalid_request'], 'a malformed business id on removal too');
    });

    test('only owners add members: a member gets 403, an outsider 403, and nothing changes', async () => {
      const owner = await newUser(s);
      const member = await newUser(s);
      const outsider = await newUser(s);
      const target = await newUser(s);
      const biz = await newBusiness(s, owner);
      await addMember(s, owner, biz.id, member);
      for (const caller of [member, outsider]) {
        const r = await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: caller.token, json: { email: target.email } });
        assert.equal(r.status, 403);
      }
      assert.equal((await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: outsider.token, json: { email: outsider.email } })).status, 403, 'no self-invite');
      const list = await call(s.url, 'GET', `/api/business/${biz.id}/members`, { token: owner.token });
      assert.equal(list.body.length, 2);
    });

    test('an owner removed while adding someone (ownership checked, nothing written yet) adds nobody: 403', async () => {
      const a = await newUser(s);
      const b = await newUser(s);
      const accomplice = await newUser(s);
      const biz = await newBusiness(s, a);
      await addMember(s, a, biz.id, b, 'owner');
      const h = holding(s.deps.businesses, 'addMember');
      const adding = members.addMember({ ...s.deps, businesses: h.store }, b.id, biz.id, { email: accomplice.email, role: 'owner' });
      await h.atGate;
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${b.id}`, { token: a.token })).status, 204);
      h.release();
      await assert.rejects(adding, forbidden);
      const list = await call(s.url, 'GET', `/api/business/${biz.id}/members`, { token: a.token });
      assert.deepEqual(list.body.map((m: { user_id: string }) => m.user_id), [a.id]);
    });

    test('an owner removed while removing someone else (checked, nothing written yet) removes nobody: 403', async () => {
      const a = await newUser(s);
      const b = await newUser(s);
      const c = await newUser(s);
      const biz = await newBusiness(s, a);
      await addMember(s, a, biz.id, b, 'owner');
      await addMember(s, a, biz.id, c);
      const h = holding(s.deps.businesses, 'removeMember');
      const removing = members.removeMember({ ...s.deps, businesses: h.store }, b.id, biz.id, c.id);
      await h.atGate;
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${b.id}`, { token: a.token })).status, 204);
      h.release();
      await assert.rejects(removing, forbidden);
      const list = await call(s.url, 'GET', `/api/business/${biz.id}/members`, { token: a.token });
      assert.deepEqual(list.body.map((m: { user_id: string }) => m.user_id), [a.id, c.id]);
    });

    test('an owner removes a member (204); the removed user loses access at once, business token included', async () => {
      const owner = await newUser(s);
      const m = await newUser(s);
      const biz = await newBusiness(s, owner);
      await addMember(s, owner, biz.id, m);
      const bizToken = await businessToken(s, m, biz.id);
      const r = await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${m.id}`, { token: owner.token });
      assert.equal(r.status, 204);
      assert.equal(r.text, '');
      assert.equal((await call(s.url, 'GET', `/api/business/${biz.id}`, { token: m.token })).status, 403);
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { token: m.token, json: { business_id: biz.id } })).status, 403);
      assert.deepEqual((await call(s.url, 'GET', '/api/business', { token: m.token })).body, []);
      assert.ok(bizToken);
      const again = await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${m.id}`, { token: owner.token });
      assert.equal(again.status, 404);
    });

    test('removing or leaving revokes the business tokens of that business (401), and a re-add does not revive them', async () => {
      const owner = await newUser(s);
      const removed = await newUser(s);
      const leaver = await newUser(s);
      const biz = await newBusiness(s, owner);
      const other = await newBusiness(s, owner);
      for (const u of [removed, leaver]) await addMember(s, owner, biz.id, u);
      await addMember(s, owner, other.id, removed);
      const removedToken = await businessToken(s, removed, biz.id);
      const leaverToken = await businessToken(s, leaver, biz.id);
      const otherToken = await businessToken(s, removed, other.id);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${removed.id}`, { token: owner.token })).status, 204);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${leaver.id}`, { token: leaver.token })).status, 204);
      for (const u of [removed, leaver]) await addMember(s, owner, biz.id, u);
      for (const token of [removedToken, leaverToken]) {
        assert.equal((await call(s.url, 'POST', '/api/sync/pull', { token, json: { since_version: 0 } })).status, 401);
      }
      const fresh = await businessToken(s, removed, biz.id);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: fresh })).status, 200);
      assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: otherToken })).status, 200, 'a token of another business is kept');
      assert.equal((await call(s.url, 'GET', '/api/business', { token: removed.token })).status, 200, 'the user token is kept');
    });

    test('a member removed while their business token is issued (membership checked, token not stored yet) gets 403 and no token', async () => {
      const { owner, member, biz, caller } = await memberAsCaller(s);
      let reached!: () => void;
      let release!: () => void;
      const atGate = new Promise<void>((r) => { reached = r; });
      const released = new Promise<void>((r) => { release = r; });
      const accounts: AccountStore = {
        ...s.deps.accounts,
        saveAccessToken: async (...args) => { reached(); await released; return s.deps.accounts.saveAccessToken(...args); },
      };
      const issuing = issueBusinessToken({ ...s.deps, accounts }, caller, biz.id);
      await atGate;
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${member.id}`, { token: owner.token })).status, 204);
      release();
      await assert.rejects(issuing, forbidden);
      await addMember(s, owner, biz.id, member);
      assert.equal((await call(s.url, 'POST', '/api/auth/token', { token: member.token, json: { business_id: biz.id } })).status, 200, 're-added, the member gets a new token');
    });

    test('a member removed (204) while their push is past the membership check (not yet applied) gets 403: nothing of it lands, no version is used', async (t) => {
      const { owner, member, biz } = await memberAsCaller(s);
      const boss = device(s.url, owner.token, biz.id, 'boss-dev');
      assert.equal((await boss.push({ changes: [change(randomUUID(), 1, { before: true })] })).status, 200);
      // The push's membership check passes, then the removal is answered, then the push goes on to its transaction.
      const access = s.deps.businesses.access;
      let removal: number | undefined;
      s.deps.businesses.access = async (businessId, userId) => {
        const r = await access(businessId, userId);
        if (removal === undefined && userId === member.id) {
          removal = 0;
          removal = (await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${member.id}`, { token: owner.token })).status;
        }
        return r;
      };
      t.after(() => { s.deps.businesses.access = access; });
      const record = randomUUID();
      const r = await device(s.url, member.token, biz.id, 'leaver-dev').push({ changes: [change(record, 1, { written: 'after removal' })] });
      s.deps.businesses.access = access;
      assert.equal(removal, 204, 'the removal was answered while the push was past its check');
      assert.equal(r.status, 403, r.text);
      assert.equal(r.body.error, 'forbidden');
      const pulled = await boss.pullAll(0);
      assert.deepEqual(pulled.changes.filter((c) => c.record_uuid === record), [], 'the removed member\'s push landed after the removal\'s 204');
      assert.equal(pulled.version, 1, 'the refused push used no version');
      assert.equal((await boss.push({ changes: [change(randomUUID(), 1)] })).body.server_version, 2);
    });

    test('the last owner cannot be removed (409); with a second owner one may go', async () => {
      const owner = await newUser(s);
      const second = await newUser(s);
      const biz = await newBusiness(s, owner);
      const r = await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${owner.id}`, { token: owner.token });
      assert.equal(r.status, 409);
      assert.match(r.body.details, /last owner/);
      await addMember(s, owner, biz.id, second, 'owner');
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${owner.id}`, { token: second.token })).status, 204);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${second.id}`, { token: second.token })).status, 409);
    });

    test('two owners removing each other at once leave one owner', async () => {
      const a = await newUser(s);
      const b = await newUser(s);
      const biz = await newBusiness(s, a);
      await addMember(s, a, biz.id, b, 'owner');
      const rs = await Promise.all([
        call(s.url, 'DELETE', `/api/business/${biz.id}/members/${b.id}`, { token: a.token }),
        call(s.url, 'DELETE', `/api/business/${biz.id}/members/${a.id}`, { token: b.token }),
      ]);
      const statuses = rs.map((r) => r.status);
      assert.equal(statuses.filter((x) => x === 204).length, 1, `statuses ${statuses}`);
      const owners = await s.deps.database.db.selectFrom('memberships').select('user_id').where('business_id', '=', biz.id).where('role', '=', 'owner').execute();
      assert.equal(owners.length, 1);
    });

    test('a member may leave; a member cannot remove others (403); outsiders get 403', async () => {
      const owner = await newUser(s);
      const m1 = await newUser(s);
      const m2 = await newUser(s);
      const outsider = await newUser(s);
      const biz = await newBusiness(s, owner);
      await addMember(s, owner, biz.id, m1);
      await addMember(s, owner, biz.id, m2);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${m2.id}`, { token: m1.token })).status, 403);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${m2.id}`, { token: outsider.token })).status, 403);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${m1.id}`, { token: m1.token })).status, 204);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${biz.id}/members/not-a-uuid`, { token: owner.token })).status, 400);
      assert.equal((await call(s.url, 'DELETE', `/api/business/${UNKNOWN}/members/${m2.id}`, { token: owner.token })).status, 404);
    });
  });
}

for (const backend of BACKENDS.filter((b) => b === 'postgres')) {
  describe(`sync business members, one change at a time per business, on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('removing an owner whose add is in progress (role read, not committed) waits for it: the add came first', async () => {
      const a = await newUser(s);
      const b = await newUser(s);
      const newcomer = await newUser(s);
      const biz = await newBusiness(s, a);
      await addMember(s, a, biz.id, b, 'owner');
      const held = await holdAfter(s.deps.database, { after: 'select', table: 'memberships' },
        () => call(s.url, 'DELETE', `/api/business/${biz.id}/members/${b.id}`, { token: a.token }));
      try {
        const store = createKyselyBusinessStore(held.db, 'postgres');
        assert.equal(await store.addMember(biz.id, newcomer.id, 'member', Date.now(), b.id), 'added');
        const removal = await held.outcome();
        assert.ok(removal.waitedOn, 'the removal did not wait for the add in progress');
        assert.equal(removal.answer.status, 204);
      } finally {
        await held.close();
      }
    });

    test('removing a member whose business token is being stored (uncommitted) waits for it and revokes the token: 401 even after a re-add', async () => {
      const { owner, member, biz, caller } = await memberAsCaller(s);
      const held = await holdAfter(s.deps.database, { after: 'insert', table: 'access_tokens' },
        () => call(s.url, 'DELETE', `/api/business/${biz.id}/members/${member.id}`, { token: owner.token }));
      try {
        const accounts = createKyselyAccountStore(held.db, 'postgres');
        const issued = await issueBusinessToken({ ...s.deps, accounts }, caller, biz.id);
        const removal = await held.outcome();
        assert.ok(removal.waitedOn, 'the removal did not wait for the token being stored');
        assert.equal(removal.answer.status, 204);
        await addMember(s, owner, biz.id, member);
        assert.equal((await call(s.url, 'GET', '/api/sync/status', { token: issued.token })).status, 401, 'the token issued during the removal survived it');
      } finally {
        await held.close();
      }
    });

    test('removing a member whose push is being applied (membership read, not committed) waits for it: the push came first', async () => {
      const { owner, member, biz } = await memberAsCaller(s);
      const record = randomUUID();
      const apply = createGroupApplier('postgres');
      let removal: ReturnType<typeof call> | undefined;
      let waitedOn = false;
      await s.deps.database.db.transaction().execute(async (trx) => {
        const exec: Exec = async (text, params) => (await trx.executeQuery(CompiledQuery.raw(text, [...params]))).rows as never;
        const push = { userId: member.id, instanceId: 'd', branch: 'main', items: validatePushItems([change(record, 1)], []).items };
        const [out] = await apply(exec, [{ businessId: biz.id, push, now: Date.now() }]);
        assert.ok(out && !('refused' in out), 'still a member: applied');
        const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(trx);
        let settled = false;
        removal = call(s.url, 'DELETE', `/api/business/${biz.id}/members/${member.id}`, { token: owner.token }).finally(() => { settled = true; });
        while (!settled && !waitedOn) {
          const blocked = await sql`SELECT 1 FROM pg_stat_activity WHERE ${rows[0]!.pid}::int = ANY(pg_blocking_pids(pid))`.execute(s.deps.database.db);
          waitedOn = blocked.rows.length > 0;
          if (!waitedOn) await new Promise((r) => setTimeout(r, 5));
        }
      });
      assert.ok(waitedOn, 'the removal did not wait for the push being applied');
      assert.equal((await removal!).status, 204);
      const pulled = await device(s.url, owner.token, biz.id).pullAll(0);
      assert.deepEqual(pulled.changes.map((c) => c.record_uuid), [record], 'the push, committed before the removal, is kept');
    });
  });
}
