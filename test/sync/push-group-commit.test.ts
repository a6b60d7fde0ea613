import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openDatabase } from '../../src/core/storage/database.js';
import { syncMigrations } from '../../src/sync/storage/migrations/index.js';
import type { SyncTables } from '../../src/sync/deps.js';
import { createKyselyChangeStore } from '../../src/sync/changes/kysely-change-store.js';
import { createPushGroupCommitter } from '../../src/sync/changes/push-group-commit.js';
import { validatePushItems } from '../../src/sync/changes/push-validation.js';
import { isAppError } from '../../src/core/errors.js';
import { BACKENDS, freshStorage } from '../helpers/backends.js';

const items = (n: number, table = 'customers') => validatePushItems(Array.from({ length: n }, () => ({ table_name: table, record_uuid: randomUUID(), version: 1, operation: 'create', data: { a: 1 } })), []).items;

for (const backend of BACKENDS) {
  describe(`change store group commit on ${backend}`, () => {
    test('concurrent pushes share transactions yet each is answered with its own gap-free versions; a failing push fails alone', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const database = await openDatabase<SyncTables>({ databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db', migrations: syncMigrations });
      t.after(() => database.close());
      const store = createKyselyChangeStore(database.db, database.dialect);
      const business = randomUUID();
      const other = randomUUID();

      const results = await Promise.all(Array.from({ length: 24 }, (_, i) => store.applyPush(i % 4 === 3 ? other : business, { userId: null, instanceId: `d${i}`, branch: 'main', items: items(5) }, Date.now())));
      for (const r of results) {
        assert.equal(r.accepted, 5);
        assert.deepEqual(r.applied.map((c) => c.version), Array.from({ length: 5 }, (_, k) => r.serverVersion - 4 + k), 'a push gets consecutive versions ending at its answer');
      }
      const versionsOf = (b: string) => results.filter((_, i) => (i % 4 === 3) === (b === other)).flatMap((r) => r.applied.map((c) => c.version)).sort((a, b) => a - b);
      assert.deepEqual(versionsOf(business), Array.from({ length: 90 }, (_, k) => k + 1));
      assert.deepEqual(versionsOf(other), Array.from({ length: 30 }, (_, k) => k + 1));
      assert.equal((await store.pull(business, 0, 1000)).changes.length, 90);

      if (backend === 'sqlite') await sql`CREATE TRIGGER refuse BEFORE INSERT ON sync_records WHEN NEW.table_name = 'poison' BEGIN SELECT RAISE(ABORT, 'refused'); END`.execute(database.db);
      else await sql`ALTER TABLE sync_records ADD CONSTRAINT refuse CHECK (table_name <> 'poison') NOT VALID`.execute(database.db);
      const mixed = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => store.applyPush(business, { userId: null, instanceId: `m${i}`, branch: 'main', items: items(2, i === 2 ? 'poison' : 'customers') }, Date.now())));
      assert.deepEqual(mixed.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
      const page = await store.pull(business, 90, 1000);
      assert.deepEqual(page.changes.map((c) => c.version), Array.from({ length: 10 }, (_, k) => 91 + k), 'the failed push used up no version');
      assert.ok(page.changes.every((c) => c.table_name === 'customers'));
    });

    test('a push whose user is no longer a member is refused (forbidden, no version used) without failing the others of its group', async (t) => {
      const s = await freshStorage(backend);
      t.after(() => s.cleanup());
      const database = await openDatabase<SyncTables>({ databaseUrl: s.databaseUrl, pgSchema: s.pgSchema, dataDir: s.dataDir, sqliteFile: 'sync.db', migrations: syncMigrations });
      t.after(() => database.close());
      const store = createKyselyChangeStore(database.db, database.dialect);
      const [member, former] = [randomUUID(), randomUUID()];
      const business = randomUUID();
      await database.db.insertInto('users').values([member, former].map((id) => ({ id, email: `${id}@example.com`, name: 'u', password_hash: 'x', created_at: 0 }))).execute();
      await database.db.insertInto('businesses').values({ id: business, name: 'b', abn: '51824753556', created_by: member, created_at: 0 }).execute();
      await database.db.insertInto('memberships').values({ business_id: business, user_id: member, role: 'owner', created_at: 0 }).execute();
      // Submitted in one turn, so the four are one group.
      const users = [member, former, member, null];
      const outcomes = await Promise.allSettled(users.map((userId, i) => store.applyPush(business, { userId, instanceId: `d${i}`, branch: 'main', items: items(2) }, Date.now())));
      assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      const refused = outcomes[1] as PromiseRejectedResult;
      assert.ok(isAppError(refused.reason) && refused.reason.code === 'forbidden', String(refused.reason));
      const page = await store.pull(business, 0, 100);
      assert.deepEqual(page.changes.map((c) => [c.version, c.instance_id]), [[1, 'd0'], [2, 'd0'], [3, 'd2'], [4, 'd2'], [5, 'd3'], [6, 'd3']]);
    });
  });
}

describe('group commit linger', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  function committer(lingerMs: number) {
    const groups: string[][] = [];
    const c = createPushGroupCommitter<string, string>(async (items) => {
      groups.push([...items]);
      await sleep(5);
      return items;
    }, { maxBatch: 32, submitter: (item) => item.split(':')[0]!, lingerMs });
    return { groups, submit: (item: string) => c.submit('q', item) };
  }

  test('a group waits briefly for a device that is pushing but not yet queued, so both share one commit', async () => {
    const { groups, submit } = committer(40);
    await Promise.all([submit('a:1'), submit('b:1')]);
    const a = submit('a:2');
    await sleep(10);
    await Promise.all([a, submit('b:2')]);
    assert.deepEqual(groups, [['a:1', 'b:1'], ['a:2', 'b:2']]);
  });

  test('it waits at most the linger, and not at all for a device that stopped pushing', async () => {
    const { groups, submit } = committer(30);
    await Promise.all([submit('a:1'), submit('b:1')]);
    let t = performance.now();
    await submit('a:2');
    const waited = performance.now() - t;
    assert.ok(waited >= 25 && waited < 200, `b was active, so a:2 waited for it up to the linger (${waited.toFixed(0)} ms)`);
    await sleep(80);
    t = performance.now();
    await submit('a:3');
    assert.ok(performance.now() - t < 25, 'b has been quiet longer than the active window: no wait');
    assert.deepEqual(groups, [['a:1', 'b:1'], ['a:2'], ['a:3']]);
  });
});
