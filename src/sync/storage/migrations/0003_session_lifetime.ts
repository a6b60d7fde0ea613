import type { Kysely, Migration } from 'kysely';

/**
 * The absolute end of a session (refresh family), copied onto every refresh
 * token of the family, so refreshing can never extend a session past it
 * (ASVS V10.4.8). Rows of sessions opened before this migration have NULL:
 * their end is set at their next refresh.
 */
export const sessionLifetimeMigration: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('refresh_tokens').addColumn('session_expires_at', 'bigint').execute();
  },
};
