import { chunks } from '../../core/storage/chunks.js';
import { prepared } from '../../core/storage/prepared.js';
import type { Kysely, Selectable } from 'kysely';
import type { DialectName } from '../../core/storage/database.js';
import type { AccountTables } from '../accounts/tables.js';
import type { AddOutcome, Business, BusinessStore, RemoveOutcome } from './business-store.js';
import type { BusinessTables, BusinessesTable } from './tables.js';

type Tables = BusinessTables & Pick<AccountTables, 'users' | 'access_tokens'>;

const toBusiness = (r: Selectable<BusinessesTable>): Business => ({ id: r.id, name: r.name, abn: r.abn, createdBy: r.created_by, createdAt: Number(r.created_at) });

/**
 * Portable SQL except one lock: on PostgreSQL a membership change locks the
 * business row (SELECT ... FOR UPDATE) before it reads the roles it depends on
 * (the caller's, the owners'), so under READ COMMITTED those reads see every
 * change that took the lock before; SQLite transactions are already
 * serialized by its single writer.
 */
export function createKyselyBusinessStore(db: Kysely<Tables>, dialect: DialectName): BusinessStore {
  const accessQuery = (businessId: string, userId: string) => db.selectFrom('businesses as b')
    .leftJoin('memberships as m', (j) => j.onRef('m.business_id', '=', 'b.id').on('m.user_id', '=', userId))
    .select('m.role')
    .where('b.id', '=', businessId);
  // Every business-scoped request runs it: prepared once per connection on PostgreSQL.
  prepared(accessQuery('', '').compile().sql);

  async function lockBusiness(trx: Kysely<Tables>, businessId: string): Promise<void> {
    if (dialect === 'postgres') await trx.selectFrom('businesses').select('id').where('id', '=', businessId).forUpdate().execute();
  }

  async function roleIn(trx: Kysely<Tables>, businessId: string, userId: string) {
    return (await trx.selectFrom('memberships').select('role').where('business_id', '=', businessId).where('user_id', '=', userId).executeTakeFirst())?.role;
  }

  return {
    async createBusiness(b) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('businesses').values({ id: b.id, name: b.name, abn: b.abn, created_by: b.createdBy, created_at: b.createdAt }).execute();
        await trx.insertInto('memberships').values({ business_id: b.id, user_id: b.createdBy, role: 'owner', created_at: b.createdAt }).execute();
      });
    },

    async findBusiness(id) {
      const r = await db.selectFrom('businesses').selectAll().where('id', '=', id).executeTakeFirst();
      return r ? toBusiness(r) : undefined;
    },

    async listBusinessesOf(userId) {
      const rows = await db.selectFrom('memberships as m')
        .innerJoin('businesses as b', 'b.id', 'm.business_id')
        .select(['b.id', 'b.name', 'b.abn', 'b.created_by', 'b.created_at', 'm.role'])
        .where('m.user_id', '=', userId)
        .orderBy('b.created_at').orderBy('b.id')
        .execute();
      return rows.map((r) => ({ ...toBusiness(r), role: r.role }));
    },

    roleOf(businessId, userId) {
      return roleIn(db, businessId, userId);
    },

    async access(businessId, userId) {
      const r = await accessQuery(businessId, userId).executeTakeFirst();
      return r ? { exists: true, role: r.role ?? undefined } : { exists: false };
    },

    async membersAmong(businessId, userIds) {
      const found = new Set<string>();
      for (const chunk of chunks(userIds)) {
        const rows = await db.selectFrom('memberships').select('user_id').where('business_id', '=', businessId).where('user_id', 'in', chunk).execute();
        for (const r of rows) found.add(r.user_id);
      }
      return found;
    },

    async listMembers(businessId) {
      const rows = await db.selectFrom('memberships as m')
        .innerJoin('users as u', 'u.id', 'm.user_id')
        .select(['u.id', 'u.email', 'u.name', 'm.role', 'm.created_at'])
        .where('m.business_id', '=', businessId)
        .orderBy('m.created_at').orderBy('u.email')
        .execute();
      return rows.map((r) => ({ userId: r.id, email: r.email, name: r.name, role: r.role, addedAt: Number(r.created_at) }));
    },

    async addMember(businessId, userId, role, now, addedBy) {
      return db.transaction().execute(async (trx): Promise<AddOutcome> => {
        await lockBusiness(trx, businessId);
        if ((await roleIn(trx, businessId, addedBy)) !== 'owner') return 'not_owner';
        const r = await trx.insertInto('memberships')
          .values({ business_id: businessId, user_id: userId, role, created_at: now })
          .onConflict((oc) => oc.columns(['business_id', 'user_id']).doNothing())
          .executeTakeFirst();
        return Number(r.numInsertedOrUpdatedRows ?? 0) === 1 ? 'added' : 'already_member';
      });
    },

    async removeMember(businessId, userId, removedBy) {
      return db.transaction().execute(async (trx): Promise<RemoveOutcome> => {
        await lockBusiness(trx, businessId);
        const targetRole = await roleIn(trx, businessId, userId);
        if (!targetRole) return 'not_member';
        if (targetRole === 'owner') {
          const owners = await trx.selectFrom('memberships').select((eb) => eb.fn.countAll<number>().as('n'))
            .where('business_id', '=', businessId).where('role', '=', 'owner').executeTakeFirstOrThrow();
          if (Number(owners.n) <= 1) return 'last_owner';
        }
        if (removedBy !== userId && (await roleIn(trx, businessId, removedBy)) !== 'owner') return 'not_allowed';
        await trx.deleteFrom('memberships').where('business_id', '=', businessId).where('user_id', '=', userId).execute();
        // Revoked, not merely refused while not a member: otherwise a re-add would bring the old tokens back.
        await trx.deleteFrom('access_tokens').where('user_id', '=', userId).where('business_id', '=', businessId).execute();
        return 'removed';
      });
    },
  };
}
