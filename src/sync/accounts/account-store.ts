/** A registered user as the domain sees it. */
export interface User {
  id: string;
  /** Lower-cased. */
  email: string;
  name: string;
  passwordHash: string;
  createdAt: number;
}

/** What a valid access token stands for. */
export interface AccessGrant {
  userId: string;
  /** Set for business-scoped tokens. */
  businessId: string | undefined;
  /** The refresh family the token descends from (undefined only for tokens issued outside a session). */
  familyId: string | undefined;
  expiresAt: number;
}

/** A new access + refresh token pair of one refresh family, as hashes. */
export interface SessionIssue {
  userId: string;
  familyId: string;
  accessHash: string;
  accessExpiresAt: number;
  refreshHash: string;
  refreshExpiresAt: number;
  /**
   * Absolute end of the session: no refresh token of the family outlives it
   * (stores cap `refreshExpiresAt` at it). On rotation the family keeps the end
   * set at login; this value only applies to families that have none yet.
   */
  sessionExpiresAt: number;
  now: number;
}

export type RotateOutcome =
  | { outcome: 'rotated'; userId: string; familyId: string }
  /** The token had already been exchanged: the whole family has been revoked. */
  | { outcome: 'reused'; userId: string }
  /** Unknown, expired or revoked. */
  | { outcome: 'invalid' };

/**
 * Persistence of users and tokens. Tokens arrive already hashed: nothing in a
 * store ever sees a usable secret.
 */
export interface AccountStore {
  /** Inserts the user; false when the e-mail is already registered (the unique index decides, so two concurrent registrations cannot both win). */
  createUser(user: User): Promise<boolean>;
  findUserByEmail(email: string): Promise<User | undefined>;
  findUserById(id: string): Promise<User | undefined>;
  /** Stores a new access + refresh token pair and drops the user's expired tokens, so token tables stay bounded. */
  issueSession(issue: SessionIssue): Promise<void>;
  /**
   * Stores a single access token (business-scoped tokens). One that joins a
   * family is stored only if the family still has an unexpired access token
   * (it was not revoked since the caller's token was checked), atomically with
   * respect to `revokeFamily` and rotation: `revoked`, and nothing stored, when
   * it has none. One for a business is stored only while the user is a member,
   * atomically with respect to a removal (which deletes the user's tokens of
   * that business): `not_member`, and nothing stored, otherwise.
   */
  saveAccessToken(tokenHash: string, grant: AccessGrant, now: number): Promise<'saved' | 'revoked' | 'not_member'>;
  /** The grant of an unexpired access token; undefined when unknown, expired or revoked. */
  findAccessGrant(tokenHash: string, now: number): Promise<AccessGrant | undefined>;
  /** The grants of those of `tokenHashes` that are unexpired, by hash (the feed re-checks all sockets of a business at once). */
  findAccessGrants(tokenHashes: readonly string[], now: number): Promise<Map<string, AccessGrant>>;
  /**
   * Exchanges a refresh token, atomically: marks the presented token used and
   * stores the next pair in the same family. A token that was already used is
   * evidence of theft, so its whole family (refresh and access tokens) is revoked.
   * A token past its own expiry or past its session's absolute end is invalid,
   * and so is one whose family a concurrent revocation has just deleted.
   * Rotations and revocations of one user's families take turns, so a
   * revocation never misses the token a concurrent rotation adds.
   */
  rotateRefreshToken(presentedHash: string, next: Omit<SessionIssue, 'userId' | 'familyId'>): Promise<RotateOutcome>;
  /** Deletes every refresh and access token of the family (of `userId`), including any a concurrent rotation or `saveAccessToken` adds. */
  revokeFamily(userId: string, familyId: string): Promise<void>;
}
