import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { User } from '../../src/sync/accounts/account-store.js';
import type { Business } from '../../src/sync/businesses/business-store.js';
import type { SyncDeps } from '../../src/sync/deps.js';
import { SYNC_STORE_FACTORIES } from './sync-stores.js';

/** The BusinessStore contract (src/sync/businesses/business-store.ts) on every implementation. */
for (const f of SYNC_STORE_FACTORIES) {
  describe(`BusinessStore conformance: ${f.name}`, () => {
    let deps: SyncDeps;
    before(async () => { deps = await f.open(); });
    after(() => deps.close());

    async function newUser(name = 'U'): Promise<User> {
      const u: User = { id: randomUUID(), email: `u-${randomUUID()}@example.com`, name, passwordHash: 'x', createdAt: 1 };
      await deps.accounts.createUser(u);
      return u;
    }
    async function newBusiness(owner: User, createdAt = Date.now()): Promise<Business> {
      const b: Business = { id: randomUUID(), name: `B ${randomUUID().slice(0, 4)}`, abn: '51824753556', createdBy: owner.id, createdAt };
      await deps.businesses.createBusiness(b);
      return b;
    }

    test('a new business has its creator as owner; it is found by id and listed for its members only, oldest first', async () => {
      const owner = await newUser();
      const stranger = await newUser();
      const older = await newBusiness(owner, 1000);
      const newer = await newBusiness(owner, 2000);
      assert.deepEqual(await deps.businesses.findBusiness(older.id), older);
      assert.equal(await deps.businesses.findBusiness(randomUUID()), undefined);
      assert.equal(await deps.businesses.roleOf(older.id, owner.id), 'owner');
      assert.equal(await deps.businesses.roleOf(older.id, stranger.id), undefined);
      assert.deepEqual((await deps.businesses.listBusinessesOf(owner.id)).map((b) => [b.id, b.role]), [[older.id, 'owner'], [newer.id, 'owner']]);
      assert.deepEqual(await deps.businesses.listBusinessesOf(stranger.id), []);
    });

    test('addMember adds once; members are listed in the order they joined, with their role', async () => {
      const owner = await newUser('Owner');
      const m = await newUser('Member');
      const b = await newBusiness(owner);
      assert.equal(await deps.businesses.addMember(b.id, m.id, 'member', Date.now() + 10, owner.id), 'added');
      assert.equal(await deps.businesses.addMember(b.id, m.id, 'owner', Date.now() + 20, owner.id), 'already_member');
      assert.equal(await deps.businesses.roleOf(b.id, m.id), 'member');
      assert.deepEqual((await deps.businesses.listMembers(b.id)).map((x) => [x.userId, x.role, x.name]), [[owner.id, 'owner', 'Owner'], [m.id, 'member', 'Member']]);
    });

    test('only an owner adds (not_owner for a member or a stranger) and only an owner or the member themselves removes (not_allowed)', async () => {
      const owner = await newUser();
      const m = await newUser();
      const other = await newUser();
      const stranger = await newUser();
      const b = await newBusiness(owner);
      await deps.businesses.addMember(b.id, m.id, 'member', Date.now(), owner.id);
      await deps.businesses.addMember(b.id, other.id, 'member', Date.now(), owner.id);
      assert.equal(await deps.businesses.addMember(b.id, stranger.id, 'owner', Date.now(), m.id), 'not_owner');
      assert.equal(await deps.businesses.addMember(b.id, stranger.id, 'owner', Date.now(), stranger.id), 'not_owner');
      assert.equal(await deps.businesses.roleOf(b.id, stranger.id), undefined);
      assert.equal(await deps.businesses.removeMember(b.id, other.id, m.id), 'not_allowed');
      assert.equal(await deps.businesses.removeMember(b.id, other.id, stranger.id), 'not_allowed');
      assert.equal(await deps.businesses.removeMember(b.id, m.id, m.id), 'removed', 'a member leaves');
      assert.deepEqual((await deps.businesses.listMembers(b.id)).map((x) => x.userId), [owner.id, other.id]);
    });

    test('access tells an unknown business from a known one, and a member\'s role from a stranger in one answer', async () => {
      const owner = await newUser();
      const m = await newUser();
      const stranger = await newUser();
      const b = await newBusiness(owner);
      const other = await newBusiness(stranger);
      await deps.businesses.addMember(b.id, m.id, 'member', Date.now(), owner.id);
      assert.deepEqual(await deps.businesses.access(b.id, owner.id), { exists: true, role: 'owner' });
      assert.deepEqual(await deps.businesses.access(b.id, m.id), { exists: true, role: 'member' });
      assert.deepEqual(await deps.businesses.access(b.id, stranger.id), { exists: true, role: undefined });
      assert.deepEqual(await deps.businesses.access(other.id, m.id), { exists: true, role: undefined }, 'a membership elsewhere counts for nothing');
      assert.deepEqual(await deps.businesses.access(randomUUID(), owner.id), { exists: false });
    });

    test('membersAmong answers which of many users belong to the business, and nothing of another business', async () => {
      const owner = await newUser();
      const m = await newUser();
      const outsider = await newUser();
      const b = await newBusiness(owner);
      const other = await newBusiness(outsider);
      await deps.businesses.addMember(b.id, m.id, 'member', Date.now(), owner.id);
      assert.deepEqual(await deps.businesses.membersAmong(b.id, [owner.id, m.id, outsider.id, randomUUID()]), new Set([owner.id, m.id]));
      assert.deepEqual(await deps.businesses.membersAmong(other.id, [owner.id, m.id]), new Set());
      assert.deepEqual(await deps.businesses.membersAmong(b.id, []), new Set());
    });

    test('removeMember: removed, not_member, and never the last owner, even when two owners remove each other at once', async () => {
      const a = await newUser();
      const c = await newUser();
      const m = await newUser();
      const b = await newBusiness(a);
      await deps.businesses.addMember(b.id, m.id, 'member', Date.now(), a.id);
      assert.equal(await deps.businesses.removeMember(b.id, m.id, a.id), 'removed');
      assert.equal(await deps.businesses.removeMember(b.id, m.id, a.id), 'not_member');
      assert.equal(await deps.businesses.removeMember(b.id, a.id, a.id), 'last_owner');
      await deps.businesses.addMember(b.id, c.id, 'owner', Date.now(), a.id);
      const outcomes = await Promise.all([deps.businesses.removeMember(b.id, a.id, c.id), deps.businesses.removeMember(b.id, c.id, a.id)]);
      assert.deepEqual(outcomes.sort(), ['last_owner', 'removed']);
      assert.equal((await deps.businesses.listMembers(b.id)).length, 1);
    });
  });
}
