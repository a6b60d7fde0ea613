import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { runExpiryCleanup, startExpiryCleanup } from '../../src/core/storage/expiry-cleanup.js';
import { syncExpiryRules } from '../../src/sync/storage/expiry-rules.js';
import { BACKENDS, TEST_DATABASE_URL } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newUser, startSync, type SyncUnderTest, type TestUser } from '../helpers/sync.js';

const DAY = 86_400_000;

for (const backend of BACKENDS) {
  describe(`expiry cleanup of the sync tables on ${backend}`, () => {
    let s: SyncUnderTest;
    let u: TestUser;
    before(async () => {
      s = await startSync(backend, { resolvedConflictRetentionDays: 30 });
      u = await newUser(s);
    });
    after(() => s.close());

    const db = () => s.deps.database.db;
    const rules = () => syncExpiryRules(s.deps.config);
    const hash = () => randomBytes(32).toString('hex');

    async function accessToken(expiresAt: number, businessId: string | null = null) {
      const h = hash();
      await db().insertInto('access_tokens').values({ token_hash: h, user_id: u.id, business_id: businessId, family_id: null, expires_at: expiresAt, created_at: 0 }).execute();
      return h;
    }
    async function refreshToken(expiresAt: number, usedAt: number | null = null) {
      const h = hash();
      await db().insertInto('refresh_tokens').values({ token_hash: h, family_id: randomUUID(), user_id: u.id, expires_at: expiresAt, created_at: 0, used_at: usedAt }).execute();
      return h;
    }
    async function conflict(resolvedAt: number | null) {
      const r = await db().insertInto('sync_conflicts').values({
        business_id: randomUUID(), branch_name: 'main', table_name: 't', record_uuid: randomUUID(), operation: 'update', version: 1,
        instance_id: 'd', local_data: '{}', remote_data: '{}', resolution: resolvedAt === null ? 'pending' : 'remote', created_at: 0, resolved_at: resolvedAt, applied_version: null,
      }).returning('id').executeTakeFirstOrThrow();
      return r.id;
    }
    const exists = async (table: 'access_tokens' | 'refresh_tokens', h: string) =>
      (await db().selectFrom(table).select('token_hash').where('token_hash', '=', h).executeTakeFirst()) !== undefined;
    const conflictExists = async (id: number) => (await db().selectFrom('sync_conflicts').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;

    test('removes expired user and business access tokens, expired refresh tokens (used or not) and old resolved conflicts; keeps the rest', async () => {
      const now = Date.now();
      const gone = {
        access: [await accessToken(now - 1), await accessToken(now, randomUUID()), await accessToken(now - DAY, randomUUID())],
        refresh: [await refreshToken(now - 1), await refreshToken(now - DAY, now - 2 * DAY)],
        conflicts: [await conflict(now - 31 * DAY)],
      };
      const kept = {
        access: [await accessToken(now + 60_000), await accessToken(now + 60_000, randomUUID())],
        // A used refresh token still unexpired must stay: presenting it again revokes its family.
        refresh: [await refreshToken(now + DAY, now - 1)],
        conflicts: [await conflict(now - 29 * DAY), await conflict(null)],
      };
      const removed = await runExpiryCleanup(s.deps.database, rules(), now);
      assert.deepEqual(removed, { access_tokens: 3, refresh_tokens: 2, resolved_conflicts: 1 });
      for (const h of gone.access) assert.equal(await exists('access_tokens', h), false);
      for (const h of gone.refresh) assert.equal(await exists('refresh_tokens', h), false);
      for (const id of gone.conflicts) assert.equal(await conflictExists(id), false);
      for (const h of kept.access) assert.equal(await exists('access_tokens', h), true);
      for (const h of kept.refresh) assert.equal(await exists('refresh_tokens', h), true);
      for (const id of kept.conflicts) assert.equal(await conflictExists(id), true);
      // The user's own session is untouched.
      const me = await call(s.url, 'GET', '/api/business', { token: u.token });
      assert.equal(me.status, 200, me.text);
    });

    test('one run does bounded work: batches of batchSize, at most maxBatches per rule; the next run continues', async () => {
      const now = Date.now();
      for (let i = 0; i < 7; i++) await accessToken(now - 1 - i);
      const first = await runExpiryCleanup(s.deps.database, rules(), now, { batchSize: 2, maxBatches: 2 });
      assert.equal(first['access_tokens'], 4);
      const second = await runExpiryCleanup(s.deps.database, rules(), now, { batchSize: 2, maxBatches: 2 });
      assert.equal(second['access_tokens'], 3);
      assert.equal((await runExpiryCleanup(s.deps.database, rules(), now))['access_tokens'], 0);
    });

    test('the schedule runs on its own, again and again, and stops', async () => {
      const now = Date.now();
      const h = await accessToken(now - 1);
      const runs: Array<Record<string, number> | { error: unknown }> = [];
      const stop = startExpiryCleanup({ database: s.deps.database, rules: rules(), intervalMs: 20, now: () => now, onRun: (r) => runs.push(r) });
      for (let i = 0; i < 500 && runs.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
      await stop();
      const count = runs.length;
      assert.ok(count >= 3, `ran ${count} times`);
      assert.ok(runs.every((r) => !('error' in r)), JSON.stringify(runs));
      assert.equal(await exists('access_tokens', h), false);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(runs.length, count, 'no run after stop');
    });

    test('a row a transaction holds is skipped, not waited for; the next run takes it (PostgreSQL)', { skip: backend === 'postgres' ? false : 'SQLite has a single writer' }, async () => {
      const now = Date.now();
      const held = await accessToken(now - 1);
      const free = [await accessToken(now - 1), await accessToken(now - 1)];
      const other = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${s.deps.config.dbSchema}` });
      await other.connect();
      try {
        await other.query('BEGIN');
        await other.query('SELECT 1 FROM access_tokens WHERE token_hash = $1 FOR UPDATE', [held]);
        const run = runExpiryCleanup(s.deps.database, rules(), now);
        const r = await Promise.race([run, new Promise<'waited'>((ok) => setTimeout(() => ok('waited'), 5_000))]);
        assert.notEqual(r, 'waited', 'the cleanup waited for the locked row');
        assert.equal((r as Record<string, number>)['access_tokens'], 2);
        for (const h of free) assert.equal(await exists('access_tokens', h), false);
        assert.equal(await exists('access_tokens', held), true);
        await other.query('COMMIT');
      } finally {
        await other.end();
      }
      assert.equal((await runExpiryCleanup(s.deps.database, rules(), now))['access_tokens'], 1);
    });
  });
}
