import type { Kysely, Selectable } from 'kysely';
import { chunks } from '../../core/storage/chunks.js';
import type { DialectName } from '../../core/storage/database.js';
import { prepared } from '../../core/storage/prepared.js';
import type { AccessGrant, AccountStore, RotateOutcome, User } from './account-store.js';
import type { AccountTables, UsersTable } from './tables.js';

/**
 * Portable SQL except one lock: on PostgreSQL, whatever writes or deletes the
 * tokens of a refresh family first locks its user's row (SQLite transactions
 * are already serialized by its single writer). Under READ COMMITTED each
 * statement sees what committed before it started, so a revocation that waited
 * for that lock also deletes the token a concurrent rotation or business-token
 * issue has just added, and one that comes after a revocation finds the family
 * gone instead of adding to it. FOR NO KEY UPDATE (not FOR UPDATE) leaves the
 * foreign-key checks of token inserts, such as logins, free.
 */
export function createKyselyAccountStore(db: Kysely<AccountTables>, dialect: DialectName): AccountStore {
  const toUser = (r: Selectable<UsersTable>): User => ({ id: r.id, email: r.email, name: r.name, passwordHash: r.password_hash, createdAt: Number(r.created_at) });

  // Every authenticated request runs this lookup: prepared once per connection on PostgreSQL.
  const grantQuery = (tokenHash: string, now: number) => db.selectFrom('access_tokens').select(['user_id', 'business_id', 'family_id', 'expires_at'])
    .where('token_hash', '=', tokenHash).where('expires_at', '>', now);
  prepared(grantQuery('', 0).compile().sql);

  /** Exclusive for rotations and revocations; shared for business-token issues, which only need no revocation meanwhile. */
  async function lockUser(trx: Kysely<AccountTables>, userId: string, mode: 'exclusive' | 'shared'): Promise<void> {
    if (dialect !== 'postgres') return;
    const q = trx.selectFrom('users').select('id').where('id', '=', userId);
    await (mode === 'exclusive' ? q.forNoKeyUpdate() : q.forShare()).execute();
  }

  /**
   * Under the user's lock. Access tokens first, as issueSession deletes expired ones, so the two never wait on each
   * other in a cycle. The number of refresh tokens deleted (0: the family was already gone).
   */
  async function revokeFamilyIn(trx: Kysely<AccountTables>, familyId: string): Promise<number> {
    await trx.deleteFrom('access_tokens').where('family_id', '=', familyId).execute();
    const r = await trx.deleteFrom('refresh_tokens').where('family_id', '=', familyId).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  return {
    async createUser(user) {
      const r = await db.insertInto('users')
        .values({ id: user.id, email: user.email, name: user.name, password_hash: user.passwordHash, created_at: user.createdAt })
        .onConflict((oc) => oc.column('email').doNothing())
        .executeTakeFirst();
      return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
    },

    async findUserByEmail(email) {
      const r = await db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
      return r ? toUser(r) : undefined;
    },

    async findUserById(id) {
      const r = await db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
      return r ? toUser(r) : undefined;
    },

    async issueSession(s) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('access_tokens').where('user_id', '=', s.userId).where('expires_at', '<=', s.now).execute();
        await trx.deleteFrom('refresh_tokens').where('user_id', '=', s.userId).where('expires_at', '<=', s.now).execute();
        await trx.insertInto('refresh_tokens').values({
          token_hash: s.refreshHash, family_id: s.familyId, user_id: s.userId, expires_at: Math.min(s.refreshExpiresAt, s.sessionExpiresAt),
          created_at: s.now, used_at: null, session_expires_at: s.sessionExpiresAt,
        }).execute();
        await trx.insertInto('access_tokens').values({ token_hash: s.accessHash, user_id: s.userId, business_id: null, family_id: s.familyId, expires_at: s.accessExpiresAt, created_at: s.now }).execute();
      });
    },

    async saveAccessToken(tokenHash, grant, now) {
      const row = {
        token_hash: tokenHash, user_id: grant.userId, business_id: grant.businessId ?? null,
        family_id: grant.familyId ?? null, expires_at: grant.expiresAt, created_at: now,
      };
      const { familyId, businessId } = grant;
      return db.transaction().execute(async (trx) => {
        if (familyId !== undefined) {
          await lockUser(trx, grant.userId, 'shared');
          const alive = await trx.selectFrom('access_tokens').select('token_hash')
            .where('family_id', '=', familyId).where('expires_at', '>', now).limit(1).executeTakeFirst();
          if (!alive) return 'revoked';
        }
        if (businessId !== undefined) {
          // FOR SHARE: a removal deleting the membership (and this user's tokens of the business) either waits for
          // this insert and deletes the token with the others, or commits first and this finds no membership.
          let membership = trx.selectFrom('memberships').select('user_id').where('business_id', '=', businessId).where('user_id', '=', grant.userId);
          if (dialect === 'postgres') membership = membership.forShare();
          if (!(await membership.executeTakeFirst())) return 'not_member';
        }
        await trx.insertInto('access_tokens').values(row).execute();
        return 'saved';
      });
    },

    async findAccessGrant(tokenHash, now): Promise<AccessGrant | undefined> {
      const r = await grantQuery(tokenHash, now).executeTakeFirst();
      if (!r) return undefined;
      return { userId: r.user_id, businessId: r.business_id ?? undefined, familyId: r.family_id ?? undefined, expiresAt: Number(r.expires_at) };
    },

    async findAccessGrants(tokenHashes, now) {
      const grants = new Map<string, AccessGrant>();
      for (const chunk of chunks(tokenHashes)) {
        const rows = await db.selectFrom('access_tokens').select(['token_hash', 'user_id', 'business_id', 'family_id', 'expires_at'])
          .where('token_hash', 'in', chunk).where('expires_at', '>', now).execute();
        for (const r of rows) grants.set(r.token_hash, { userId: r.user_id, businessId: r.business_id ?? undefined, familyId: r.family_id ?? undefined, expiresAt: Number(r.expires_at) });
      }
      return grants;
    },

    async rotateRefreshToken(presentedHash, next): Promise<RotateOutcome> {
      return db.transaction().execute(async (trx): Promise<RotateOutcome> => {
        // The user's lock comes with the token in one statement. The token's columns may predate the lock's holder
        // (only the locked row is re-read after a wait), which is why the conditional UPDATE below decides.
        let presented = trx.selectFrom('refresh_tokens as r').innerJoin('users as u', 'u.id', 'r.user_id')
          .select(['r.family_id', 'r.user_id', 'r.expires_at', 'r.session_expires_at'])
          .where('r.token_hash', '=', presentedHash);
        if (dialect === 'postgres') presented = presented.forNoKeyUpdate('u');
        const row = await presented.executeTakeFirst();
        const sessionEnd = row?.session_expires_at == null ? next.sessionExpiresAt : Number(row.session_expires_at);
        if (!row || Number(row.expires_at) <= next.now || sessionEnd <= next.now) return { outcome: 'invalid' };
        // The conditional UPDATE is the arbiter: of two concurrent exchanges of one token exactly one marks it.
        const marked = await trx.updateTable('refresh_tokens').set({ used_at: next.now })
          .where('token_hash', '=', presentedHash).where('used_at', 'is', null).executeTakeFirst();
        if (Number(marked.numUpdatedRows) !== 1) {
          // Nothing left to delete: a revocation that held the lock first has already removed the family, this token included.
          if ((await revokeFamilyIn(trx, row.family_id)) === 0) return { outcome: 'invalid' };
          return { outcome: 'reused', userId: row.user_id };
        }
        await trx.insertInto('refresh_tokens').values({
          token_hash: next.refreshHash, family_id: row.family_id, user_id: row.user_id, expires_at: Math.min(next.refreshExpiresAt, sessionEnd),
          created_at: next.now, used_at: null, session_expires_at: sessionEnd,
        }).execute();
        await trx.insertInto('access_tokens').values({ token_hash: next.accessHash, user_id: row.user_id, business_id: null, family_id: row.family_id, expires_at: next.accessExpiresAt, created_at: next.now }).execute();
        return { outcome: 'rotated', userId: row.user_id, familyId: row.family_id };
      });
    },

    async revokeFamily(userId, familyId) {
      await db.transaction().execute(async (trx) => {
        await lockUser(trx, userId, 'exclusive');
        await revokeFamilyIn(trx, familyId);
      });
    },
  };
}
