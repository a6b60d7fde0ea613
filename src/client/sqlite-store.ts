// Why: a durable store for Node apps (CLIs, Electron main, servers acting as devices); a separate entry so browser builds never see better-sqlite3.
import Database from 'better-sqlite3';
import { storeInUse } from './errors.js';
import type { CollectionName, Collections, LocalStore, StoreOp } from './local-store.js';

const COLLECTIONS: readonly CollectionName[] = ['records', 'outbox', 'conflicts', 'meta'];

/**
 * A store in one SQLite file: a key/JSON table per collection. WAL with
 * synchronous=FULL, so a write has reached the disk when `write` resolves.
 * The connection locks the file exclusively (locking_mode=EXCLUSIVE) from its
 * first write until close: a second process cannot open it meanwhile.
 */
export function createSqliteStore(file: string): LocalStore {
  // A lock held by another process answers at once rather than after better-sqlite3's default 5 s.
  const db = new Database(file, { timeout: 100 });
  try {
    // Set before WAL is first used: the WAL index then lives in this process's memory, not in a shared file.
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = WAL');
    db.exec('BEGIN IMMEDIATE; COMMIT');
  } catch (e: unknown) {
    db.close();
    if ((e as { code?: string }).code === 'SQLITE_BUSY') throw storeInUse(`the SQLite store ${file}`);
    throw e;
  }
  db.pragma('synchronous = FULL');
  // Records are keyed by random UUIDs, so a pulled page touches pages all over the table: keep them in memory.
  db.pragma('cache_size = -32768');
  for (const c of COLLECTIONS) db.exec(`CREATE TABLE IF NOT EXISTS ${c} (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
  const stmts = Object.fromEntries(COLLECTIONS.map((c) => [c, {
    get: db.prepare<[string], { value: string }>(`SELECT value FROM ${c} WHERE key = ?`),
    getMany: db.prepare<[string], { key: string; value: string }>(`SELECT key, value FROM ${c} WHERE key IN (SELECT value FROM json_each(?))`),
    list: db.prepare<[string, string], { value: string }>(`SELECT value FROM ${c} WHERE key >= ? AND key < ? ORDER BY key`),
    put: db.prepare<[string, string]>(`INSERT INTO ${c} (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`),
    del: db.prepare<[string]>(`DELETE FROM ${c} WHERE key = ?`),
  }])) as Record<CollectionName, { get: Database.Statement<[string], { value: string }>; getMany: Database.Statement<[string], { key: string; value: string }>; list: Database.Statement<[string, string], { value: string }>; put: Database.Statement<[string, string]>; del: Database.Statement<[string]> }>;
  const apply = db.transaction((ops: readonly StoreOp[]) => {
    for (const o of ops) {
      if (o.op === 'put') stmts[o.collection].put.run(o.key, JSON.stringify(o.value));
      else stmts[o.collection].del.run(o.key);
    }
  });
  let claimed = false;
  return {
    async get<C extends CollectionName>(collection: C, key: string) {
      const row = stmts[collection].get.get(key);
      return row ? (JSON.parse(row.value) as Collections[C]) : undefined;
    },
    async getMany<C extends CollectionName>(collection: C, keys: readonly string[]) {
      // One statement for the lot: a pulled page asks for a thousand keys, mostly absent on a first sync.
      const found = new Map(stmts[collection].getMany.all(JSON.stringify(keys)).map((r) => [r.key, r.value]));
      return keys.map((k) => {
        const value = found.get(k);
        return value === undefined ? undefined : (JSON.parse(value) as Collections[C]);
      });
    },
    async list<C extends CollectionName>(collection: C, prefix = '') {
      // Every key is below U+FFFF in the first differing position, so this bound covers exactly the prefix.
      return stmts[collection].list.all(prefix, `${prefix}\uffff`).map((r) => JSON.parse(r.value) as Collections[C]);
    },
    async write(ops, options) {
      if (!options?.relaxed) {
        apply(ops);
        return;
      }
      // Not fsynced at commit (WAL stays consistent: all or nothing); the next FULL commit syncs it with its own.
      db.pragma('synchronous = NORMAL');
      try {
        apply(ops);
      } finally {
        db.pragma('synchronous = FULL');
      }
    },
    async claim() {
      // Other processes are kept out by the file lock since creation; this keeps out a second client of this object.
      if (claimed) throw storeInUse(`the SQLite store ${file}`);
      claimed = true;
    },
    async close() {
      claimed = false;
      db.close();
    },
  };
}
