import type { Kysely, Migration } from 'kysely';

/**
 * Users, their tokens (hashed), businesses and memberships. The same DDL runs
 * on SQLite and PostgreSQL: ids are TEXT UUIDs, times BIGINT epoch milliseconds.
 */
export const accountsMigration: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.createTable('users')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('email', 'text', (c) => c.notNull().unique())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('password_hash', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();

    await db.schema.createTable('access_tokens')
      .addColumn('token_hash', 'text', (c) => c.primaryKey())
      .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
      .addColumn('business_id', 'text')
      .addColumn('family_id', 'text')
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('access_tokens_user_idx').on('access_tokens').columns(['user_id', 'expires_at']).execute();
    await db.schema.createIndex('access_tokens_family_idx').on('access_tokens').column('family_id').execute();

    await db.schema.createTable('refresh_tokens')
      .addColumn('token_hash', 'text', (c) => c.primaryKey())
      .addColumn('family_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('used_at', 'bigint')
      .execute();
    await db.schema.createIndex('refresh_tokens_family_idx').on('refresh_tokens').column('family_id').execute();
    await db.schema.createIndex('refresh_tokens_user_idx').on('refresh_tokens').columns(['user_id', 'expires_at']).execute();

    await db.schema.createTable('businesses')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('abn', 'text', (c) => c.notNull())
      .addColumn('created_by', 'text', (c) => c.notNull().references('users.id'))
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .execute();

    await db.schema.createTable('memberships')
      .addColumn('business_id', 'text', (c) => c.notNull().references('businesses.id').onDelete('cascade'))
      .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
      .addColumn('role', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('memberships_pk', ['business_id', 'user_id'])
      .execute();
    await db.schema.createIndex('memberships_user_idx').on('memberships').column('user_id').execute();
  },
};
