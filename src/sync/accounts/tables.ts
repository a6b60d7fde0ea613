import type { MembershipsTable } from '../businesses/tables.js';

/**
 * Row shapes of the account tables (migration 0001_accounts). Times are epoch
 * milliseconds in BIGINT columns; tokens are stored only as SHA-256 hashes.
 */
export interface UsersTable {
  id: string;
  /** Lower-cased, unique. */
  email: string;
  name: string;
  /** `scrypt$<log2N>$<r>$<p>$<salt>$<key>` (see password-hash.ts). */
  password_hash: string;
  created_at: number;
}

export interface AccessTokensTable {
  token_hash: string;
  user_id: string;
  /** Set for business-scoped tokens; NULL for user tokens. */
  business_id: string | null;
  /** The refresh family the token descends from, so revoking the family revokes it too. */
  family_id: string | null;
  expires_at: number;
  created_at: number;
}

export interface RefreshTokensTable {
  token_hash: string;
  family_id: string;
  user_id: string;
  expires_at: number;
  created_at: number;
  /** Set when the token has been exchanged; presenting it again revokes the family. */
  used_at: number | null;
  /** Absolute end of the session (family); NULL for sessions opened before migration 0003, set at their next refresh. */
  session_expires_at: number | null;
}

export interface AccountTables {
  users: UsersTable;
  access_tokens: AccessTokensTable;
  refresh_tokens: RefreshTokensTable;
  /** Read only, to save a business token atomically with the membership it rests on (the businesses' table). */
  memberships: Pick<MembershipsTable, 'business_id' | 'user_id'>;
}
