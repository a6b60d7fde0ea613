// Why: every connection to a service's SQLite file gets the same settings, including a writer thread's, which must not load the query builder or PostgreSQL driver to get them.
import type BetterSqlite3 from 'better-sqlite3';

/** The settings of every connection to a service's file: its own and those of its writer threads. */
export function configureSqliteConnection(sqlite: BetterSqlite3.Database): void {
  // A checkpointed WAL is cut back to this size rather than keeping its high-water mark on disk.
  sqlite.pragma('journal_size_limit = 1048576');
  // FULL: every commit is fsynced, so an answered write survives a crash or power loss.
  // Writers batch their commits (group commit) to keep this affordable.
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
}
