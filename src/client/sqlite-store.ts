// Why: a durable store for Node apps (CLIs, Electron main, servers acting as devices); a separate entry so browser builds never see better-sqlite3.
import Database from 'better-sqlite3';
import type { CollectionName, Collections, LocalStore, StoreOp } from './local-store.js';

const COLLECTIONS: readonly CollectionName[] = ['records', 'outbox', 'conflicts', 'meta'];

/**
 * A store in one SQLite file: a key/JSON table per collection. WAL with
 * synchronous=FULL, so a write has reached the disk when `write` resolves.
 */
export function createSqliteStore(file: string): LocalStore {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  // Records are keyed by random UUIDs, so a pulled page touches pages all over the table: keep them in memory.
  db.pragma('cache_size = -32768');
  for (const c of COLLECTIONS) db.exec(`CREATE TABLE IF NOT EXISTS ${c} (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
  const stmts = Object.fromEntries(COLLECTIONS.map((c) => [c, {
    get: db.prepare<[string], { value: string }>(`SELECT value FROM ${c} WHERE key = ?`),
    list: db.prepare<[string, string], { value: string }>(`SELECT value FROM ${c} WHERE key >= ? AND key < ? ORDER BY key`),
    put: db.prepare<[string, string]>(`INSERT INTO ${c} (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`),
    del: db.prepare<[string]>(`DELETE FROM ${c} WHERE key = ?`),
  }])) as Record<CollectionName, { get: Database.Statement<[string], { value: string }>; list: Database.Statement<[string, string], { value: string }>; put: Database.Statement<[string, string]>; del: Database.Statement<[string]> }>;
  const apply = db.transaction((ops: readonly StoreOp[]) => {
    for (const o of ops) {
      if (o.op === 'put') stmts[o.collection].put.run(o.key, JSON.stringify(o.value));
      else stmts[o.collection].del.run(o.key);
    }
  });
  return {
    async get<C extends CollectionName>(collection: C, key: string) {
      const row = stmts[collection].get.get(key);
      return row ? (JSON.parse(row.value) as Collections[C]) : undefined;
    },
    async getMany<C extends CollectionName>(collection: C, keys: readonly string[]) {
      const stmt = stmts[collection].get;
      return keys.map((k) => {
        const row = stmt.get(k);
        return row ? (JSON.parse(row.value) as Collections[C]) : undefined;
      });
    },
    async list<C extends CollectionName>(collection: C, prefix = '') {
      // Every key is below U+FFFF in the first differing position, so this bound covers exactly the prefix.
      return stmts[collection].list.all(prefix, `${prefix}\uffff`).map((r) => JSON.parse(r.value) as Collections[C]);
    },
    async write(ops) {
      apply(ops);
    },
    async close() {
      db.close();
    },
  };
}
