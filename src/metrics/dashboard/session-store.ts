import type { Kysely } from 'kysely';

/** The table behind `SessionStore`, created by migration 0002_dashboard_sessions. */
export type DashboardSessionTables = {
  dashboard_sessions: {
    id_hash: string;
    token_hash: string;
    created_at: number;
    expires_at: number;
  };
};

export interface StoredSession {
  /** SHA-256 of the cookie value; the cookie value itself is never stored. */
  idHash: string;
  /** Hash of the tenant token that opened the session (same hash as the token table holds). */
  tokenHash: string;
  createdAt: number;
  expiresAt: number;
}

/** Server-side dashboard sessions, in domain terms. One implementation serves SQLite and PostgreSQL: the SQL is identical. */
export interface SessionStore {
  insert(session: StoredSession): Promise<void>;
  /** The session with this id hash, expired or not; undefined when there is none. */
  find(idHash: string): Promise<StoredSession | undefined>;
  delete(idHash: string): Promise<void>;
}

export function createSessionStore(db: Kysely<DashboardSessionTables>): SessionStore {
  return {
    async insert(s) {
      await db.insertInto('dashboard_sessions')
        .values({ id_hash: s.idHash, token_hash: s.tokenHash, created_at: s.createdAt, expires_at: s.expiresAt })
        .execute();
    },
    async find(idHash) {
      const row = await db.selectFrom('dashboard_sessions').selectAll().where('id_hash', '=', idHash).executeTakeFirst();
      return row && { idHash: row.id_hash, tokenHash: row.token_hash, createdAt: Number(row.created_at), expiresAt: Number(row.expires_at) };
    },
    async delete(idHash) {
      await db.deleteFrom('dashboard_sessions').where('id_hash', '=', idHash).execute();
    },
  };
}
