// The schema name reaches search_path and DDL as text: anything but a plain identifier is refused before a pool exists.
// A connection the server closes must not end the process (an unheard `error` event would).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { createServer, type AddressInfo } from 'node:net';
import { openDatabase } from '../../src/core/storage/database.js';
import { CONNECT_TIMEOUT_MS, createPgPool } from '../../src/core/storage/pg-pool.js';
import { BACKENDS, TEST_DATABASE_URL as URL } from '../helpers/backends.js';

test('a pool is made only on a plain lower-case identifier as its schema', async () => {
  for (const bad of ['Metrics', 'a-b', 'a;drop schema public', 'x"y', '1abc', '', 'a'.repeat(64)]) {
    assert.throws(() => createPgPool(URL, bad, 1), /invalid PostgreSQL schema name/, bad);
  }
  // Made without connecting: a pool opens connections on first use.
  const pool = createPgPool(URL, 'metrics_2', 1);
  await pool.end();
});

test('a connection PostgreSQL closes, idle or checked out, is dropped and replaced; the process lives on', { skip: !BACKENDS.includes('postgres') && 'PostgreSQL not reachable' }, async (t) => {
  const admin = new pg.Client({ connectionString: URL });
  await admin.connect();
  t.after(() => admin.end());
  const pool = createPgPool(URL, 'public', 2, 'metrics');
  t.after(() => pool.end());
  const pids = async () => (await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [name])).rows.map((r) => r.pid);
  const name = `pg-pool-test-${process.pid}`;
  const warnings: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => { warnings.push(String(chunk)); return true; }) as typeof process.stdout.write;
  t.after(() => { process.stdout.write = write; });

  // Idle in the pool.
  await pool.query(`SET application_name = '${name}'`);
  assert.equal((await pids()).length, 1);
  const idleDropped = new Promise((resolve) => pool.once('error', resolve));
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [name]);
  await idleDropped;
  assert.equal((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one, 1, 'a new connection serves the next query');
  const line = warnings.filter((w) => w.startsWith('{')).map((w) => JSON.parse(w) as Record<string, unknown>).find((w) => /closed an idle connection/.test(String(w['msg'])));
  assert.ok(line, warnings.join(''));
  // In the services' log format, on their stream: ISO time, the service named.
  assert.deepEqual([line['level'], line['service'], typeof line['err']], [40, 'metrics', 'string']);
  assert.match(String(line['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  // Checked out, between two queries (a transaction's await).
  const client = await pool.connect();
  await client.query(`SET application_name = '${name}'`);
  const clientError = new Promise((resolve) => client.once('error', resolve));
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [name]);
  await clientError;
  await assert.rejects(client.query('SELECT 1'));
  client.release(true);
  assert.equal((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one, 1);
});

test('a PostgreSQL that accepts connections and never answers fails the start within the connect bound, not never', { timeout: CONNECT_TIMEOUT_MS + 20_000 }, async (t) => {
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => { silent.close(); });
  const { port } = silent.address() as AddressInfo;
  const started = Date.now();
  await assert.rejects(openDatabase({
    databaseUrl: `postgres://nobody@127.0.0.1:${port}/test`, pgSchema: 'stalled', dataDir: '.', sqliteFile: 'unused.db', migrations: () => ({}),
  }), /timeout/i);
  assert.ok(Date.now() - started < CONNECT_TIMEOUT_MS + 5_000, `gave up after ${Date.now() - started} ms`);
});
