import type { Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';
import { accountsMigration } from './0001_accounts.js';
import { changesMigration } from './0002_changes.js';
import { sessionLifetimeMigration } from './0003_session_lifetime.js';
import { cleanupIndexesMigration } from './0004_cleanup_indexes.js';
import { dropRecordUuidIndexMigration } from './0005_drop_record_uuid_index.js';
import { changeChainMigration } from './0006_change_chain.js';
import { resolutionChangesMigration } from './0007_resolution_changes.js';
import { uploadSessionsMigration } from './0008_upload_sessions.js';

/**
 * The sync service's migrations, in the order they apply. Names sort in that
 * order and are recorded in `schema_migrations`, so a name never changes once
 * released. To add one, create `000N_<what>.ts` and append it here; a
 * migration whose SQL differs per dialect receives the dialect.
 */
const MIGRATIONS: ReadonlyArray<readonly [name: string, build: (dialect: DialectName) => Migration]> = [
  ['0001_accounts', () => accountsMigration],
  ['0002_changes', changesMigration],
  ['0003_session_lifetime', () => sessionLifetimeMigration],
  ['0004_cleanup_indexes', () => cleanupIndexesMigration],
  ['0005_drop_record_uuid_index', () => dropRecordUuidIndexMigration],
  ['0006_change_chain', () => changeChainMigration],
  ['0007_resolution_changes', () => resolutionChangesMigration],
  ['0008_upload_sessions', () => uploadSessionsMigration],
];

export function syncMigrations(dialect: DialectName): Record<string, Migration> {
  return Object.fromEntries(MIGRATIONS.map(([name, build]) => [name, build(dialect)]));
}
