// Why: every connection to a service's SQLite file gets the same settings, including a writer thread's, which must not load the query builder or PostgreSQL driver to get them.
import type BetterSqlite3 from 'better-sqlite3';

/** What a connection may tune for its own load; SQLite's (and better-sqlite3's) defaults otherwise. */
export interface SqliteTuning {
  /** Page cache in KiB (better-sqlite3 builds SQLite with 16,000). */
  cacheKiB?: number;
  /** WAL pages after which a commit checkpoints (SQLite's default: 1,000). */
  walAutocheckpointPages?: number;
}

/** The settings of every connection to a service's file: its own and those of its writer threads. */
export function configureSqliteConnection(sqlite: BetterSqlite3.Database, tuning: SqliteTuning = {}): void {
  // A checkpointed WAL is cut back to this size when it restarts rather than keeping its high-water mark on disk.
  // Per connection: the writing connections need it most.
  sqlite.pragma('journal_size_limit = 1048576');
  // FULL: every commit is fsynced, so an answered write survives a crash or power loss.
  // Writers batch their commits (group commit) to keep this affordable.
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  if (tuning.cacheKiB !== undefined) sqlite.pragma(`cache_size = -${tuning.cacheKiB}`);
  if (tuning.walAutocheckpointPages !== undefined) sqlite.pragma(`wal_autocheckpoint = ${tuning.walAutocheckpointPages}`);
}
