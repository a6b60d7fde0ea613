import { chunks } from '../../core/storage/chunks.js';
import { prepared } from '../../core/storage/prepared.js';
import type { Kysely, Selectable } from 'kysely';
import type { DialectName } from '../../core/storage/database.js';
import type { AccountTables } from '../accounts/tables.js';
import type { Business, BusinessStore, RemoveOutcome } from './business-store.js';
import type { BusinessTables, BusinessesTable } from './tables.js';

type Tables = BusinessTables & Pick<AccountTables, 'users'>;

const toBusiness = (r: Selectable<BusinessesTable>): Business => ({ id: r.id, name: r.name, abn: r.abn, createdBy: r.created_by, createdAt: Number(r.created_at) });

/**
 * Portable SQL except one lock: on PostgreSQL the business row is locked
 * (SELECT ... FOR UPDATE) before counting owners; SQLite transactions are
 * already serialized by its single writer.
 */
export function createKyselyBusinessStore(db: Kysely<Tables>, dialect: DialectName): BusinessStore {
  const accessQuery = (businessId: string, userId: string) => db.selectFrom('businesses as b')
    .leftJoin('memberships as m', (j) => j.onRef('m.business_id', '=', 'b.id').on('m.user_id', '=', userId))
    .select('m.role')
    .where('b.id', '=', businessId);
  // Every business-scoped request runs it: prepared once per connection on PostgreSQL.
  prepared(accessQuery('', '').compile().sql);
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

    async roleOf(businessId, userId) {
      const r = await db.selectFrom('memberships').select('role').where('business_id', '=', businessId).where('user_id', '=', userId).executeTakeFirst();
      return r?.role;
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

    async addMember(businessId, userId, role, now) {
      const r = await db.insertInto('memberships')
        .values({ business_id: businessId, user_id: userId, role, created_at: now })
        .onConflict((oc) => oc.columns(['business_id', 'user_id']).doNothing())
        .executeTakeFirst();
      return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
    },

    async removeMember(businessId, userId) {
      return db.transaction().execute(async (trx): Promise<RemoveOutcome> => {
        if (dialect === 'postgres') {
          await trx.selectFrom('businesses').select('id').where('id', '=', businessId).forUpdate().execute();
        }
        const target = await trx.selectFrom('memberships').select('role').where('business_id', '=', businessId).where('user_id', '=', userId).executeTakeFirst();
        if (!target) return 'not_member';
        if (target.role === 'owner') {
          const owners = await trx.selectFrom('memberships').select((eb) => eb.fn.countAll<number>().as('n'))
            .where('business_id', '=', businessId).where('role', '=', 'owner').executeTakeFirstOrThrow();
          if (Number(owners.n) <= 1) return 'last_owner';
        }
        await trx.deleteFrom('memberships').where('business_id', '=', businessId).where('user_id', '=', userId).execute();
        return 'removed';
      });
    },
  };
}
