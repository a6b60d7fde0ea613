// The schema name reaches search_path and DDL as text: anything but a plain identifier is refused before a pool exists.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPgPool } from '../../src/core/storage/pg-pool.js';

const URL = 'postgres://postgres@127.0.0.1:5432/test';

test('a pool is made only on a plain lower-case identifier as its schema', async () => {
  for (const bad of ['Metrics', 'a-b', 'a;drop schema public', 'x"y', '1abc', '', 'a'.repeat(64)]) {
    assert.throws(() => createPgPool(URL, bad, 1), /invalid PostgreSQL schema name/, bad);
  }
  // Made without connecting: a pool opens connections on first use.
  const pool = createPgPool(URL, 'metrics_2', 1);
  await pool.end();
});
