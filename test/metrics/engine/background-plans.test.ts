import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import { DELETE_ENDED_SQL } from '../../../src/metrics/alerts/alert-store.js';
import { RETENTION_SQL } from '../../../src/metrics/storage/engine/engine-writer.js';
import { DUE_ROLLUPS } from '../../../src/metrics/storage/engine/tenant-rollup.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../../helpers/backends.js';
import { openTestMetricsDatabase } from '../../helpers/metrics.js';

/**
 * The background statements (the writer's passes, the retention sweep) run on a schedule whatever the data's
 * size: each must reach what it needs through an index, never read a whole
 * table of the ones that grow with the fleet and its history. The tables are
 * tiny here, so on PostgreSQL sequential scans are switched off: a plan that
 * still has one has no index path at all. Scanning the partial index of the
 * tenant windows due a rollup is fine: it holds only those.
 */
const GROWING = /(?:SCAN|Seq Scan on) (?:reports|blocks|tenant_windows|alerts)\b(?! USING INDEX tenant_windows_unrolled)/;

const STATEMENTS: Array<[what: string, sql: string, params: number[]]> = [
  ['tenant windows due a rollup', DUE_ROLLUPS, [0, 32]],
  ['retention: expired head rows', RETENTION_SQL.head, [0]],
  ['retention: rows in expired blocks', RETENTION_SQL.sealedRows, [0]],
  ['retention: expired blocks', RETENTION_SQL.blocks, [0]],
  ['retention: expired tenant rollups', RETENTION_SQL.tenantWindows, [0]],
  ['retention: ended alert incidents', DELETE_ENDED_SQL, [0, 0]],
];

for (const backend of BACKENDS) {
  describe(`the background passes' statements on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
    });
    after(async () => {
      await database.close();
      await storage.cleanup();
    });

    const plan = async (sql: string, params: number[]): Promise<string> => {
      if (database.sqlite) return (database.sqlite.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
      const client = await database.pgPool!.connect();
      try {
        await client.query('SET enable_seqscan = off');
        let i = 0;
        const r = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql.replace(/\?/g, () => `$${++i}`)}`, params);
        return r.rows.map((row) => row['QUERY PLAN']).join('\n');
      } finally {
        await client.query('RESET enable_seqscan');
        client.release();
      }
    };

    for (const [what, sql, params] of STATEMENTS) {
      test(`${what}: through an index`, async () => {
        const p = await plan(sql, params);
        assert.doesNotMatch(p, GROWING, p);
      });
    }

    test('tenant windows due a rollup: through the partial index of them', async () => {
      assert.match(await plan(DUE_ROLLUPS, [0, 32]), /tenant_windows_unrolled/);
    });
  });
}
