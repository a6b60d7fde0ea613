import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { Kysely, PostgresDialect, SqliteDialect, sql, type Migration, type SqliteDatabase } from 'kysely';
import { assertSchemaName, CONNECT_TIMEOUT_MS, createPgPool } from './pg-pool.js';
import { configureSqliteConnection, type SqliteTuning } from './sqlite-connection.js';
import { makeDir } from '../make-dir.js';
import { redactConnectionUrl } from '../connection-url.js';

export type DialectName = 'sqlite' | 'postgres';

/**
 * An open database of one service: a Kysely instance for queries, the dialect
 * (for the few places where SQL differs), and the raw driver handle for what
 * Kysely does not cover (SQLite transactions held across statements, the
 * PostgreSQL blob store's streamed chunks).
 */
export interface Database<DB> {
  readonly db: Kysely<DB>;
  readonly dialect: DialectName;
  readonly sqlite?: BetterSqlite3.Database;
  readonly pgPool?: pg.Pool;
  /** Where the PostgreSQL pool points, for a worker thread that opens its own. */
  readonly pgTarget?: { url: string; schema: string };
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** PostgreSQL URL; when absent the embedded SQLite database is used. */
  databaseUrl: string | undefined;
  /** PostgreSQL schema for this service's tables (created if missing). */
  pgSchema: string;
  /** Directory of the SQLite file. */
  dataDir: string;
  /** SQLite file name inside `dataDir`, e.g. `metrics.db`. */
  sqliteFile: string;
  /** Ordered migrations per dialect; names sort in the order they apply. */
  migrations: (dialect: DialectName) => Record<string, Migration>;
  /** Names of migrations once applied and since folded into later ones: known, though no longer run. */
  retiredMigrations?: readonly string[];
  /** Largest PostgreSQL pool. */
  pgPoolSize?: number;
  /** The service, named in the pool's own log lines (a connection the server closed). */
  service?: string;
  /** SQLite page size of a new file (an existing file keeps its own). */
  sqlitePageSize?: number;
  /** SQLite page cache and checkpoint interval of this connection, where the defaults do not fit the service's load. */
  sqliteTuning?: SqliteTuning;
}


export async function openDatabase<DB>(opts: OpenDatabaseOptions): Promise<Database<DB>> {
  const database = opts.databaseUrl ? await openPostgres<DB>(opts, opts.databaseUrl) : openSqlite<DB>(opts);
  try {
    await migrate(database, opts.migrations(database.dialect), opts.pgSchema, opts.retiredMigrations ?? []);
  } catch (e) {
    await database.close();
    throw e;
  }
  return database;
}

function openSqlite<DB>(opts: OpenDatabaseOptions): Database<DB> {
  const file = path.join(opts.dataDir, opts.sqliteFile);
  let sqlite: BetterSqlite3.Database | undefined;
  try {
    // Private: it holds the token and password hashes (and, for sync, the attachments); an existing directory is left as it is.
    makeDir(opts.dataDir, 0o700);
    sqlite = new BetterSqlite3(file);
    // Both only take effect on a new file, page size first (setting auto_vacuum fixes it). Incremental auto-vacuum
    // lets freed pages go back to the filesystem piecemeal (PRAGMA incremental_vacuum) instead of staying for ever.
    if (opts.sqlitePageSize) sqlite.pragma(`page_size = ${opts.sqlitePageSize}`);
    sqlite.pragma('auto_vacuum = INCREMENTAL');
    sqlite.pragma('journal_mode = WAL');
    configureSqliteConnection(sqlite, opts.sqliteTuning);
  } catch (e: unknown) {
    sqlite?.close();
    // SQLite's own words ("unable to open database file", "file is not a database") name neither the file nor the cause.
    const code = (e as { code?: string }).code;
    throw new Error(`cannot open the database ${path.resolve(file)}: ${e instanceof Error ? e.message : String(e)}${code ? ` (${code})` : ''}`, { cause: e });
  }
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  return { db, dialect: 'sqlite', sqlite, close: () => db.destroy() };
}

/** Distinct SQL texts kept prepared; a service uses a few dozen, so this bound is never reached in practice. */
const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely prepares every query anew; compiling the same SQL on each request
 * was a visible share of ingest CPU. Statements are reusable as long as one
 * is not run while another run of it is still iterating, which Kysely's
 * one-connection mutex already guarantees.
 */
function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sqlText: string) {
      // Kysely begins transactions deferred. With a writer thread on the same file, one that reads before it
      // writes would fail (SQLITE_BUSY_SNAPSHOT) if the thread committed in between: take the write lock first.
      const text = sqlText === 'begin' ? 'BEGIN IMMEDIATE' : sqlText;
      let stmt = cache.get(text);
      if (!stmt) {
        stmt = sqlite.prepare(text);
        if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
        cache.set(text, stmt);
      }
      return stmt;
    },
  };
}

async function openPostgres<DB>(opts: OpenDatabaseOptions, url: string): Promise<Database<DB>> {
  assertSchemaName(opts.pgSchema);
  await ensureSchema(url, opts.pgSchema);
  const pool = createPgPool(url, opts.pgSchema, opts.pgPoolSize ?? 10, opts.service);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', pgPool: pool, pgTarget: { url, schema: opts.pgSchema }, close: () => db.destroy() };
}

/** A pool on one service's schema, with BIGINT read as numbers (epoch milliseconds and versions, all below 2^53), and hot-path texts prepared (prepared.ts). */
async function ensureSchema(url: string, schema: string): Promise<void> {
  // Bounded like the pool's connections: a server that accepts and never answers fails the start instead of hanging it.
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  try {
    await client.connect();
  } catch (e: unknown) {
    // The start's first connection: its error alone ("connect ECONNREFUSED 127.0.0.1:5432") names neither the database nor the setting.
    throw new Error(`cannot connect to PostgreSQL at ${redactConnectionUrl(url)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  } catch (e: unknown) {
    // Two instances starting together can race on CREATE SCHEMA; the loser sees a duplicate.
    const code = (e as { code?: string }).code;
    if (code !== '23505' && code !== '42P06') throw e;
  } finally {
    await client.end();
  }
}

/**
 * Applies pending migrations, in name order, in ONE transaction: a failure
 * rolls every migration of this start back and stops the start, as does a
 * migration this version does not know (the database is a newer version's). Processes
 * that start together take turns: on PostgreSQL through a transaction-level
 * advisory lock keyed by the schema, on SQLite through BEGIN IMMEDIATE (a
 * deferred transaction would deadlock on its read-to-write upgrade). Kysely's
 * own Migrator is not used: it introspects every table of the whole database,
 * which is slow with many schemas and fails when another schema is dropped
 * meanwhile.
 */
async function migrate<DB>(database: Database<DB>, migrations: Record<string, Migration>, pgSchema: string, retired: readonly string[]): Promise<void> {
  const apply = async (db: Kysely<DB>) => {
    await sql`CREATE TABLE IF NOT EXISTS schema_migrations (name varchar(255) PRIMARY KEY, timestamp varchar(255) NOT NULL)`.execute(db);
    const applied = await sql<{ name: string }>`SELECT name FROM schema_migrations`.execute(db);
    const done = new Set(applied.rows.map((r) => r.name));
    // A newer version's layout: this code would read and write it as its own, and a rollback would then lose data.
    const unknown = [...done].filter((name) => !(name in migrations) && !retired.includes(name)).sort();
    if (unknown.length) {
      throw new Error(`the database was migrated by a newer version of this service (${unknown.join(', ')}, unknown to this one): run that version or a later one`);
    }
    for (const name of Object.keys(migrations).sort()) {
      if (done.has(name)) continue;
      try {
        await migrations[name]!.up(db);
      } catch (e: unknown) {
        throw new Error(`migration ${name} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
      await sql`INSERT INTO schema_migrations (name, timestamp) VALUES (${name}, ${new Date().toISOString()})`.execute(db);
    }
  };
  if (database.sqlite) {
    // Kysely runs its queries on this same connection, so they join the transaction.
    database.sqlite.exec('BEGIN IMMEDIATE');
    try {
      await apply(database.db);
      database.sqlite.exec('COMMIT');
    } catch (e: unknown) {
      database.sqlite.exec('ROLLBACK');
      throw e;
    }
    return;
  }
  await database.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext(${`migrations:${pgSchema}`}))`.execute(trx);
    await apply(trx);
  });
}
