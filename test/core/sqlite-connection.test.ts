// configureSqliteConnection is the one place every connection to a service's file, writer threads' included, gets its
// settings: read them back from a fresh connection, with and without a tuning.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { configureSqliteConnection } from '../../src/core/storage/sqlite-connection.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'sqlite-connection-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function open(name: string): BetterSqlite3.Database {
  const db = new BetterSqlite3(path.join(dir, name));
  db.pragma('journal_mode = WAL');
  return db;
}
const read = (db: BetterSqlite3.Database, pragma: string) => db.pragma(pragma, { simple: true });

test('every connection commits durably, cuts a restarted WAL back to 1 MiB, waits for locks and checks foreign keys', () => {
  const db = open('plain.db');
  configureSqliteConnection(db);
  assert.equal(read(db, 'synchronous'), 2, 'synchronous=FULL');
  assert.equal(read(db, 'journal_size_limit'), 1048576);
  assert.equal(read(db, 'busy_timeout'), 5000);
  assert.equal(read(db, 'foreign_keys'), 1);
  // Untuned, the library's own defaults stay.
  assert.equal(read(db, 'cache_size'), -16000);
  assert.equal(read(db, 'wal_autocheckpoint'), 1000);
  db.close();
});

test('a connection\'s tuning sets its page cache and checkpoint interval, and only those', () => {
  const db = open('tuned.db');
  configureSqliteConnection(db, { cacheKiB: 4096, walAutocheckpointPages: 4096 });
  assert.equal(read(db, 'cache_size'), -4096);
  assert.equal(read(db, 'wal_autocheckpoint'), 4096);
  assert.equal(read(db, 'synchronous'), 2);
  assert.equal(read(db, 'journal_size_limit'), 1048576);
  db.close();
});
