import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Compilable } from 'kysely';
import { BACKENDS } from '../helpers/backends.js';
import { startSync, type SyncUnderTest } from '../helpers/sync.js';
import { pushSql } from '../../src/sync/changes/push-sql.js';

interface PlanNode { 'Node Type': string; Plans?: PlanNode[] }
function find(n: PlanNode, match: (n: PlanNode) => boolean): PlanNode | undefined {
  if (match(n)) return n;
  for (const c of n.Plans ?? []) {
    const hit = find(c, match);
    if (hit) return hit;
  }
  return undefined;
}

/**
 * The queries that must stay cheap as tables grow read through an index:
 * conflict listing in id order whatever the status filter, and the batched
 * expiry cleanup. SQLite's plan is asked directly; on PostgreSQL (whose planner
 * prefers a scan on tiny tables) the index must exist with the right columns.
 */
for (const backend of BACKENDS) {
  describe(`sync query plans on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    const db = () => s.deps.database.db;
    const listing = (filter: 'all' | 'pending' | 'resolved') => {
      let q = db().selectFrom('sync_conflicts').selectAll().where('business_id', '=', 'b').where('id', '>', 0);
      if (filter === 'pending') q = q.where('resolution', '=', 'pending');
      if (filter === 'resolved') q = q.where('resolution', '!=', 'pending');
      return q.orderBy('id').limit(50);
    };

    function sqlitePlan(query: Compilable): string {
      const c = query.compile();
      const rows = s.deps.database.sqlite!.prepare(`EXPLAIN QUERY PLAN ${c.sql}`).all(...(c.parameters as unknown[])) as Array<{ detail: string }>;
      return rows.map((r) => r.detail).join('\n');
    }

    async function pgIndexes(table: string): Promise<string[]> {
      const r = await s.deps.database.pgPool!.query<{ indexdef: string }>('SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1', [table]);
      return r.rows.map((x) => x.indexdef.replace(/^.* USING btree /, ''));
    }

    test('listing conflicts reads an index in id order for every status filter (no sort of the whole business)', async () => {
      if (backend === 'sqlite') {
        for (const filter of ['all', 'pending', 'resolved'] as const) {
          const plan = sqlitePlan(listing(filter));
          assert.doesNotMatch(plan, /TEMP B-TREE|SCAN sync_conflicts/, `${filter}: ${plan}`);
          assert.match(plan, /USING (COVERING )?INDEX/, plan);
        }
      } else {
        assert.ok((await pgIndexes('sync_conflicts')).includes('(business_id, id)'));
      }
    });

    test('the expiry cleanup finds expired tokens and old resolved conflicts through an index', async () => {
      const cases = [['access_tokens', 'expires_at'], ['refresh_tokens', 'expires_at'], ['sync_conflicts', 'resolved_at']] as const;
      for (const [table, column] of cases) {
        if (backend === 'sqlite') {
          const plan = sqlitePlan(db().selectFrom(table).select(column).where(column, '<', 5).limit(10));
          assert.match(plan, new RegExp(`SEARCH ${table} USING (COVERING )?INDEX \\w+ \\(${column}<\\?\\)`), plan);
        } else {
          assert.ok((await pgIndexes(table)).includes(`(${column})`), table);
        }
      }
    });

    test('a pull page reads the changes above the cursor in version order and stops at the page size, never sorting the business\'s whole log', async () => {
      const sql = pushSql(backend).pull;
      if (backend === 'sqlite') {
        const rows = s.deps.database.sqlite!.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(0, 'b', 10) as Array<{ detail: string }>;
        const plan = rows.map((r) => r.detail).join('\n');
        assert.match(plan, /SEARCH c USING INDEX \w+ \(business_id=\? AND version>\? AND version<\?\)/, plan);
        assert.doesNotMatch(plan, /TEMP B-TREE/, plan);
      } else {
        const r = await s.deps.database.pgPool!.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>({ text: `EXPLAIN (FORMAT JSON) ${sql}`, values: ['b', 0, 10] });
        // The limit sits inside the join, under the one counter row: at most a page of changes is read and ordered.
        const loop = find(r.rows[0]!['QUERY PLAN'][0].Plan, (n) => n['Node Type'] === 'Nested Loop');
        assert.ok(loop && loop.Plans?.some((child) => child['Node Type'] === 'Limit'), JSON.stringify(r.rows[0]));
      }
    });

    test('the orphan sweep pages through PostgreSQL blobs by store time through an index', { skip: backend === 'postgres' ? false : 'PostgreSQL blob store only' }, async () => {
      assert.ok((await pgIndexes('attachment_blobs')).includes('(created_at, stored_name)'));
    });
  });
}
