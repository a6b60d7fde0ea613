import { mkdirSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, type Migration } from 'kysely';

export type DialectName = 'sqlite' | 'postgres';

/**
 * An open database of one service: a Kysely instance for queries, the dialect
 * (for the few places where SQL differs), and the raw driver handle for hot
 * paths that need it (batched inserts, LISTEN/NOTIFY).
 */
export interface Database<DB> {
  readonly db: Kysely<DB>;
  readonly dialect: DialectName;
  readonly sqlite?: BetterSqlite3.Database;
  readonly pgPool?: pg.Pool;
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
  /** Largest PostgreSQL pool. */
  pgPoolSize?: number;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export async function openDatabase<DB>(opts: OpenDatabaseOptions): Promise<Database<DB>> {
  const database = opts.databaseUrl ? await openPostgres<DB>(opts, opts.databaseUrl) : openSqlite<DB>(opts);
  try {
    await migrate(database.db, opts.migrations(database.dialect), database.dialect === 'postgres' ? opts.pgSchema : undefined);
  } catch (e) {
    await database.close();
    throw e;
  }
  return database;
}

function openSqlite<DB>(opts: OpenDatabaseOptions): Database<DB> {
  mkdirSync(opts.dataDir, { recursive: true });
  const sqlite = new BetterSqlite3(path.join(opts.dataDir, opts.sqliteFile));
  sqlite.pragma('journal_mode = WAL');
  // FULL: every commit is fsynced, so an answered write survives a crash or power loss.
  // Writers batch their commits (group commit) to keep this affordable.
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: sqlite }) });
  return { db, dialect: 'sqlite', sqlite, close: () => db.destroy() };
}

async function openPostgres<DB>(opts: OpenDatabaseOptions, url: string): Promise<Database<DB>> {
  if (!SCHEMA_NAME.test(opts.pgSchema)) throw new Error(`invalid PostgreSQL schema name "${opts.pgSchema}"`);
  await ensureSchema(url, opts.pgSchema);
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.pgPoolSize ?? 10,
    options: `-c search_path=${opts.pgSchema}`,
    // BIGINT columns hold epoch milliseconds and versions, all below 2^53.
    types: { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser },
  });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', pgPool: pool, close: () => db.destroy() };
}

async function ensureSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
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
 * Applies pending migrations under Kysely's migration lock; any failure stops the start.
 * On PostgreSQL the bookkeeping tables are named with their schema: unqualified, Kysely
 * would find another schema's `schema_migrations_lock` in the same database, skip
 * creating this one's, and fail.
 */
async function migrate<DB>(db: Kysely<DB>, migrations: Record<string, Migration>, pgSchema: string | undefined): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
    ...(pgSchema ? { migrationTableSchema: pgSchema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    throw new Error(`migration ${failed ?? '(unknown)'} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
