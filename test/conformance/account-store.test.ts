import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AccountStore, User } from '../../src/sync/accounts/account-store.js';
import type { SyncDeps } from '../../src/sync/deps.js';
import { SYNC_STORE_FACTORIES } from './sync-stores.js';

/** The AccountStore contract (src/sync/accounts/account-store.ts) on every implementation. */
const hash = () => randomBytes(32).toString('hex');
/** A session end past every refresh expiry these tests use: the absolute lifetime is not what they test. */
const FAR = 4_000_000_000_000;

const user = (email = `u-${randomUUID()}@example.com`): User => ({ id: randomUUID(), email, name: 'U', passwordHash: 'scrypt$x', createdAt: 1 });

/** A business `u` owns, so a business token of `u` for it may be saved. */
async function ownedBusiness(deps: SyncDeps, u: User): Promise<string> {
  const id = randomUUID();
  await deps.businesses.createBusiness({ id, name: 'B', abn: '51824753556', createdBy: u.id, createdAt: 1 });
  return id;
}

async function session(accounts: AccountStore, u: User, now: number, ttl = 60_000) {
  const issue = { userId: u.id, familyId: randomUUID(), accessHash: hash(), accessExpiresAt: now + ttl, refreshHash: hash(), refreshExpiresAt: now + 10 * ttl, sessionExpiresAt: FAR, now };
  await accounts.issueSession(issue);
  return issue;
}

for (const f of SYNC_STORE_FACTORIES) {
  describe(`AccountStore conformance: ${f.name}`, () => {
    let deps: SyncDeps;
    before(async () => { deps = await f.open(); });
    after(() => deps.close());
    test('createUser refuses a second user with the same e-mail; users are found by e-mail and id', async () => {
      const { accounts } = deps;
      const u = user();
      assert.equal(await accounts.createUser(u), true);
      assert.equal(await accounts.createUser({ ...user(u.email) }), false);
      assert.deepEqual(await accounts.findUserByEmail(u.email), u);
      assert.deepEqual(await accounts.findUserById(u.id), u);
      assert.equal(await accounts.findUserByEmail('nobody@example.com'), undefined);
    });

    test('two concurrent registrations of one e-mail: exactly one wins', async () => {
      const { accounts } = deps;
      const email = `race-${randomUUID()}@example.com`;
      const results = await Promise.all(Array.from({ length: 5 }, () => accounts.createUser(user(email))));
      assert.equal(results.filter(Boolean).length, 1);
    });

    test('an issued access token grants until it expires; business tokens carry their business', async () => {
      const { accounts } = deps;
      const u = user();
      await accounts.createUser(u);
      const now = 1_000_000;
      const s = await session(accounts, u, now);
      assert.deepEqual(await accounts.findAccessGrant(s.accessHash, now), { userId: u.id, businessId: undefined, familyId: s.familyId, expiresAt: now + 60_000 });
      assert.equal(await accounts.findAccessGrant(s.accessHash, now + 60_000), undefined, 'expired at expires_at');
      assert.equal(await accounts.findAccessGrant(hash(), now), undefined);
      const business = await ownedBusiness(deps, u);
      const bHash = hash();
      assert.equal(await accounts.saveAccessToken(bHash, { userId: u.id, businessId: business, familyId: s.familyId, expiresAt: now + 1000 }, now), 'saved');
      assert.equal((await accounts.findAccessGrant(bHash, now))?.businessId, business);
    });

    test('saveAccessToken stores a business token only for a member of the business, and only while its family lives', async () => {
      const { accounts } = deps;
      const u = user();
      const stranger = user();
      await accounts.createUser(u);
      await accounts.createUser(stranger);
      const now = 1_000_000;
      const business = await ownedBusiness(deps, u);
      const theirs = await session(accounts, stranger, now);
      const strangerHash = hash();
      assert.equal(await accounts.saveAccessToken(strangerHash, { userId: stranger.id, businessId: business, familyId: theirs.familyId, expiresAt: now + 1000 }, now), 'not_member');
      assert.equal(await accounts.findAccessGrant(strangerHash, now), undefined, 'nothing stored for a non-member');
      const mine = await session(accounts, u, now);
      await accounts.revokeFamily(u.id, mine.familyId);
      const lateHash = hash();
      assert.equal(await accounts.saveAccessToken(lateHash, { userId: u.id, businessId: business, familyId: mine.familyId, expiresAt: now + 1000 }, now), 'revoked');
      assert.equal(await accounts.findAccessGrant(lateHash, now), undefined, 'nothing stored for a revoked family');
    });

    test('findAccessGrants answers many tokens at once: only the unexpired ones, by hash', async () => {
      const { accounts } = deps;
      const u = user();
      await accounts.createUser(u);
      const now = 1_000_000;
      const live = await session(accounts, u, now);
      const expired = await session(accounts, u, now - 120_000);
      const grants = await accounts.findAccessGrants([live.accessHash, expired.accessHash, hash()], now);
      assert.deepEqual([...grants.keys()], [live.accessHash]);
      assert.equal(grants.get(live.accessHash)?.userId, u.id);
      assert.equal((await accounts.findAccessGrants([], now)).size, 0);
    });

    test('a refresh token rotates once; presenting it again revokes the whole family; unknown or expired is invalid', async () => {
      const { accounts } = deps;
      const u = user();
      await accounts.createUser(u);
      const now = 1_000_000;
      const first = await session(accounts, u, now);
      const next = { accessHash: hash(), accessExpiresAt: now + 60_000, refreshHash: hash(), refreshExpiresAt: now + 600_000, sessionExpiresAt: FAR, now };
      assert.deepEqual(await accounts.rotateRefreshToken(first.refreshHash, next), { outcome: 'rotated', userId: u.id, familyId: first.familyId });
      assert.ok(await accounts.findAccessGrant(next.accessHash, now));
      const again = { ...next, accessHash: hash(), refreshHash: hash() };
      assert.deepEqual(await accounts.rotateRefreshToken(first.refreshHash, again), { outcome: 'reused', userId: u.id });
      assert.equal(await accounts.findAccessGrant(next.accessHash, now), undefined, 'the family is revoked');
      assert.equal(await accounts.findAccessGrant(first.accessHash, now), undefined);
      assert.deepEqual(await accounts.rotateRefreshToken(next.refreshHash, { ...again, refreshHash: hash() }), { outcome: 'invalid' }, 'revoked');
      const other = await session(accounts, u, now);
      assert.deepEqual(await accounts.rotateRefreshToken(other.refreshHash, { ...next, accessHash: hash(), refreshHash: hash(), now: now + 600_000 }), { outcome: 'invalid' }, 'expired');
      assert.deepEqual(await accounts.rotateRefreshToken(hash(), { ...next, accessHash: hash(), refreshHash: hash() }), { outcome: 'invalid' });
    });

    test('of concurrent exchanges of one refresh token exactly one rotates', async () => {
      const { accounts } = deps;
      const u = user();
      await accounts.createUser(u);
      const now = 1_000_000;
      const s = await session(accounts, u, now);
      const outcomes = await Promise.all(Array.from({ length: 4 }, () => accounts.rotateRefreshToken(s.refreshHash, { accessHash: hash(), accessExpiresAt: now + 1, refreshHash: hash(), refreshExpiresAt: now + 2, sessionExpiresAt: FAR, now })));
      assert.equal(outcomes.filter((o) => o.outcome === 'rotated').length, 1);
    });

    test('revokeFamily removes the family\'s access tokens (business ones too) and nothing of another family', async () => {
      const { accounts } = deps;
      const u = user();
      await accounts.createUser(u);
      const now = 1_000_000;
      const a = await session(accounts, u, now);
      const b = await session(accounts, u, now);
      const bHash = hash();
      assert.equal(await accounts.saveAccessToken(bHash, { userId: u.id, businessId: await ownedBusiness(deps, u), familyId: a.familyId, expiresAt: now + 1000 }, now), 'saved');
      await accounts.revokeFamily(u.id, a.familyId);
      assert.equal(await accounts.findAccessGrant(a.accessHash, now), undefined);
      assert.equal(await accounts.findAccessGrant(bHash, now), undefined);
      assert.ok(await accounts.findAccessGrant(b.accessHash, now));
    });
  });
}
