import { createHash } from 'node:crypto';
import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import type { Database, DialectName } from '../../../core/storage/database.js';

/**
 * The storage engine's one way to reach SQL: hand-written statements with `?`
 * placeholders, prepared once (better-sqlite3 statements, named PostgreSQL
 * statements), no query builder on the hot paths. The same engine code runs
 * over either dialect; where SQL differs, callers branch on `dialect`.
 */
export interface SqlConn {
  readonly dialect: DialectName;
  all<T>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /** Runs a statement; resolves the number of rows it changed. */
  run(text: string, params?: readonly unknown[]): Promise<number>;
  /** Runs a statement once per parameter list, in order; resolves the rows each run changed (SQLite: one synchronous loop, not a promise per row). */
  runEach(text: string, paramLists: ReadonlyArray<readonly unknown[]>): Promise<number[]>;
  /** Runs a statement to its end, unprepared (SQLite pragmas that work a step at a time, such as incremental_vacuum). */
  exec(text: string): Promise<void>;
  /**
   * `fn` in one transaction on one connection (SQLite: BEGIN IMMEDIATE, so it never upgrades a read lock).
   * `relaxed`: the commit does not wait for the disk (SQLite synchronous=NORMAL, PostgreSQL synchronous_commit off).
   * Only for work that moves or derives data already durable (seals, rollups): a crash can lose such a
   * transaction only whole, and the next durable commit, which follows it in the log, makes it durable too.
   */
  transaction<T>(fn: (c: SqlConn) => Promise<T>, opts?: { relaxed?: boolean }): Promise<T>;
}

const SQLITE_NORMAL = 1;

/**
 * Page cache of each connection to the metrics file, in KiB. The working set
 * is small (the right edges of the head's B-trees, a query's few dozen
 * blocks) and the OS caches the file too; better-sqlite3's default of 16 MB per
 * connection made the two connections the largest malloc users at peak
 * (heaptrack of the peers benchmark: 14 MB of page cache in the writer).
 */
export const METRICS_SQLITE_CACHE_KIB = 4096;

/**
 * Runs `attempt` (one transaction) again, at most 5 times in all after a short random wait, when PostgreSQL undid it
 * to break a deadlock or a serialization conflict (nothing of it happened), or when `retryAlso` says so.
 */
export async function runAgainWhenUndone<T>(attempt: () => Promise<T>, retryAlso: (e: unknown) => boolean = () => false): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (e: unknown) {
      const code = (e as { code?: unknown } | null)?.code;
      if (!(code === '40P01' || code === '40001' || retryAlso(e)) || n >= 5) throw e;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * n));
    }
  }
}

/** What a read needs of a connection: the statements of reader.ts that may run on a connection held by another layer. */
export type SqlReader = Pick<SqlConn, 'dialect' | 'all'>;

/**
 * A SqlReader over a connection another layer holds in a transaction (the alert store's hold, on Kysely): `query`
 * runs one statement there (`?` placeholders, turned into `$n` for PostgreSQL here). Asking the pool for a second
 * connection while holding one could wait for ever once every connection is held so.
 */
export function heldReader(dialect: DialectName, query: (text: string, params: readonly unknown[]) => Promise<unknown[]>): SqlReader {
  return { dialect, all: async <T>(t: string, params: readonly unknown[] = []) => (await query(dialect === 'postgres' ? pgStatement(t).text : t, params)) as T[] };
}

/** A SqlConn over an open database's own connection (SQLite) or pool (PostgreSQL). */
export function databaseConn(database: Pick<Database<unknown>, 'sqlite' | 'pgPool'>): SqlConn {
  return database.sqlite ? sqliteConn(database.sqlite) : pgConn(database.pgPool!);
}

/** A better-sqlite3 connection as a SqlConn. Statements are cached by text; the `synchronous` level is read once, here. */
export function sqliteConn(db: BetterSqlite3.Database): SqlConn {
  const level = db.pragma('synchronous', { simple: true }) as number;
  const cache = new Map<string, BetterSqlite3.Statement>();
  const prepare = (text: string) => {
    let s = cache.get(text);
    if (!s) cache.set(text, (s = db.prepare(text)));
    return s;
  };
  let depth = 0;
  const conn: SqlConn = {
    dialect: 'sqlite',
    all: <T>(text: string, params: readonly unknown[] = []) => Promise.resolve(prepare(text).all(...params) as T[]),
    run: (text, params = []) => Promise.resolve(prepare(text).run(...params).changes),
    runEach(text, paramLists) {
      const s = prepare(text);
      return Promise.resolve(paramLists.map((params) => s.run(...params).changes));
    },
    exec: (text) => { db.exec(text); return Promise.resolve(); },
    async transaction(fn, opts) {
      if (depth > 0) return fn(conn);
      // The connection's own level (FULL) is restored after the transaction: only relaxed ones commit below it.
      const relax = opts?.relaxed === true && level > SQLITE_NORMAL;
      if (relax) db.pragma('synchronous = NORMAL');
      db.exec('BEGIN IMMEDIATE');
      depth++;
      try {
        const out = await fn(conn);
        db.exec('COMMIT');
        return out;
      } catch (e: unknown) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw e;
      } finally {
        depth--;
        if (relax) db.pragma(`synchronous = ${level}`);
      }
    },
  };
  return conn;
}

/** `?` placeholders to PostgreSQL's `$n`; statements are named so each connection prepares them once. */
function pgText(text: string): { name: string; text: string } {
  let n = 0;
  const converted = text.replace(/\?/g, () => `$${++n}`);
  return { name: `e_${createHash('sha1').update(converted).digest('hex').slice(0, 16)}`, text: converted };
}

const pgCache = new Map<string, { name: string; text: string }>();
function pgStatement(text: string): { name: string; text: string } {
  let s = pgCache.get(text);
  if (!s) pgCache.set(text, (s = pgText(text)));
  return s;
}

type PgQueryable = pg.Pool | pg.PoolClient;
type Transaction = <T>(fn: (c: SqlConn) => Promise<T>, opts?: { relaxed?: boolean }) => Promise<T>;

export function pgConn(pool: pg.Pool): SqlConn {
  const transaction: Transaction = async (fn, opts) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      if (opts?.relaxed) await client.query('SET LOCAL synchronous_commit = off');
      const out = await fn(pgOn(client));
      await client.query('COMMIT');
      return out;
    } catch (e: unknown) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  };
  return pgOn(pool, transaction);
}

/** With no `transaction`, `q` is a client already inside one: a nested transaction joins it. */
function pgOn(q: PgQueryable, transaction?: Transaction): SqlConn {
  const self: SqlConn = {
    dialect: 'postgres',
    async all<T>(text: string, params: readonly unknown[] = []) {
      const s = pgStatement(text);
      const r = await q.query({ name: s.name, text: s.text, values: params as unknown[] });
      return r.rows as T[];
    },
    async run(text, params = []) {
      const s = pgStatement(text);
      const r = await q.query({ name: s.name, text: s.text, values: params as unknown[] });
      return r.rowCount ?? 0;
    },
    async runEach(text, paramLists) {
      const out: number[] = [];
      for (const params of paramLists) out.push(await self.run(text, params));
      return out;
    },
    async exec(text) {
      await q.query(text);
    },
    transaction: transaction ?? ((fn) => fn(self)),
  };
  return self;
}
