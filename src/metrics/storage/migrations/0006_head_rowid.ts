import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * SQLite's head (`reports`) becomes a rowid table with a unique index on
 * (host_key, ts), instead of a WITHOUT ROWID table clustered on that key. A
 * report's row (about 260 bytes of packed float64 samples) is larger than what a
 * WITHOUT ROWID table keeps in a 1 KiB page (231 bytes), so each row took an
 * overflow page of its own: 1.1 KiB of file per report, and a commit wrote
 * twice the pages. A rowid table keeps up to 989 bytes in the page: rows are
 * appended in arrival order, three to a page, and only the small index entry
 * goes to the host's place in the key order (3.4x less file and commit time
 * per row, measured). PostgreSQL's head is a heap already: unchanged there.
 * The rows are copied over in one transaction, so an upgrade loses none.
 */
export const metrics0006: Record<DialectName, Migration> = {
  sqlite: {
    async up(db: Kysely<any>): Promise<void> {
      await sql`CREATE TABLE reports_rowid (
        id INTEGER PRIMARY KEY,
        host_key INTEGER NOT NULL REFERENCES hosts (key) ON DELETE CASCADE,
        ts INTEGER NOT NULL,
        samples BLOB NOT NULL)`.execute(db);
      await sql`INSERT INTO reports_rowid (host_key, ts, samples) SELECT host_key, ts, samples FROM reports ORDER BY ts, host_key`.execute(db);
      await sql`DROP TABLE reports`.execute(db);
      await sql`ALTER TABLE reports_rowid RENAME TO reports`.execute(db);
      await sql`CREATE UNIQUE INDEX reports_host_ts ON reports (host_key, ts)`.execute(db);
    },
  },
  postgres: { up: async () => undefined },
};
