import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../../helpers/backends.js';
import { useEngineDatabase } from '../../helpers/metrics.js';

for (const backend of BACKENDS) {
  describe(`the engine's SQL connection on ${backend}`, () => {
    const db = useEngineDatabase(backend);

    test('runEach runs one statement per parameter list, in order, and answers what each changed, inside a transaction and out', async () => {
      await db.conn.exec('CREATE TABLE run_each (k integer PRIMARY KEY, v text NOT NULL)');
      const insert = 'INSERT INTO run_each (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING';
      assert.deepEqual(await db.conn.runEach(insert, [[1, 'a'], [2, 'b'], [1, 'again']]), [1, 1, 0]);
      const inTransaction = await db.conn.transaction((c) => c.runEach(insert, [[3, 'c'], [2, 'again'], [4, 'd']]));
      assert.deepEqual(inTransaction, [1, 0, 1]);
      assert.deepEqual(await db.conn.runEach(insert, []), []);
      const rows = await db.conn.all<{ k: number; v: string }>('SELECT k, v FROM run_each ORDER BY k');
      assert.deepEqual(rows.map((r) => [Number(r.k), r.v]), [[1, 'a'], [2, 'b'], [3, 'c'], [4, 'd']]);
      await assert.rejects(db.conn.transaction((c) => c.runEach(insert, [[5, 'e'], [6, null]])), 'a failing row fails the call');
      assert.equal((await db.conn.all('SELECT k FROM run_each WHERE k = 5')).length, 0, 'and its transaction stores none of them');
    });
  });
}
