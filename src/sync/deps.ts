import { createDiskGuard, type DiskGuard } from '../core/storage/disk-guard.js';
import { exposeDiskGuard } from '../core/ops/self-metrics.js';
import { openDatabase, type Database } from '../core/storage/database.js';
import { createMemoryRateLimiter } from '../core/rate-limit/memory-rate-limiter.js';
import { createMemoryPubSub } from '../core/pubsub/memory-pubsub.js';
import { openSharedState, type SharedState } from '../core/ops/shared-state.js';
import type { RateLimiter } from '../core/rate-limit/rate-limiter.js';
import type { PubSub } from '../core/pubsub/pubsub.js';
import type { Redis } from 'ioredis';
import type { SyncConfig } from './config.js';
import type { AccountTables } from './accounts/tables.js';
import type { AccountStore } from './accounts/account-store.js';
import { createKyselyAccountStore } from './accounts/kysely-account-store.js';
import type { BusinessTables } from './businesses/tables.js';
import type { BusinessStore } from './businesses/business-store.js';
import { createKyselyBusinessStore } from './businesses/kysely-business-store.js';
import { syncMigrations } from './storage/migrations/index.js';
import path from 'node:path';
import type { ChangeTables } from './changes/change-tables.js';
import type { ChangeStore } from './changes/change-store.js';
import { createKyselyChangeStore } from './changes/kysely-change-store.js';
import { startPushThread, type PushThread } from './changes/push-thread-client.js';
import type { AttachmentTables } from './attachments/attachment-tables.js';
import { createKyselyAttachmentStore, type AttachmentStore } from './attachments/attachment-store.js';
import { createKyselyUploadStore, type UploadStore } from './attachments/upload-store.js';
import type { BlobStore } from './attachments/blob-store.js';
import { createLocalBlobStore } from './attachments/local-blob-store.js';
import { createPgBlobStore } from './attachments/pg-blob-store.js';
import { createHashGate, type HashGate } from './accounts/hash-gate.js';
import { createSyncSelfMetrics, type SyncSelfMetrics } from './self-metrics.js';

/** Every table of the sync database; each feature adds its own table interfaces here. */
export type SyncTables = AccountTables & BusinessTables & ChangeTables & AttachmentTables;

/**
 * Everything the sync service's routes and domain functions depend on, built
 * in one place (`createSyncDeps`) so a deployment choice (PostgreSQL, Redis)
 * changes only this file and tests get the real thing on a fresh database.
 */
export interface SyncDeps {
  config: SyncConfig;
  database: Database<SyncTables>;
  accounts: AccountStore;
  businesses: BusinessStore;
  /** Changes, record states, server versions and conflicts (push, pull, status, resolve). */
  changes: ChangeStore;
  /** Attachment metadata; the bytes are in `blobs` (local disk by default). */
  attachments: AttachmentStore;
  /** Resumable uploads in progress (their bytes are pieces in `blobs`). */
  uploads: UploadStore;
  /**
   * Attachment bytes: in PostgreSQL when the service runs on it (every instance
   * reads what any stored), unless `--attachment-dir` names a directory (which
   * several instances may share); otherwise `<data-dir>/attachments`.
   */
  blobs: BlobStore;
  /** This instance's Prometheus metrics (`/metrics`). */
  selfMetrics: SyncSelfMetrics;
  /** Bounds concurrent password hashing so logins cannot fill libuv's thread pool (attachment file I/O shares it). */
  passwordHashes: HashGate;
  /** Per-user and per-IP request limits and login lockouts; shared by all instances when backed by Redis. */
  rateLimiter: RateLimiter;
  /** Change notifications between instances (the WebSocket feed). */
  pubsub: PubSub;
  /** The Redis connection behind the limiter and pub/sub when REDIS_URL is set (`/readyz` checks it). */
  redis: Redis | undefined;
  /** Epoch milliseconds; token expiry and lockouts read it, tests move it. */
  now: () => number;
  /** Refuses pushes and uploads while the data or attachment directory's disk is under --min-free-disk-bytes. */
  diskGuard: DiskGuard;
  /** Closes the limiter, the pub/sub (and Redis), then the database. */
  close(): Promise<void>;
}

export interface SyncDepsOptions {
  /**
   * Replaces the wall clock (tests). Redis keeps its own time, so with a
   * replaced clock the limiter and pub/sub are the in-memory ones (which
   * follow it) unless the config names a Redis: then the clock moves token
   * expiry while rate-limit windows follow Redis's time.
   */
  now?: () => number;
}

function inMemoryState(now: () => number): SharedState {
  const rateLimiter = createMemoryRateLimiter(now);
  const pubsub = createMemoryPubSub();
  return { rateLimiter, pubsub, redis: undefined, async close() { await pubsub.close(); await rateLimiter.close(); } };
}

const SQLITE_FILE = 'sync.db';

export async function createSyncDeps(config: SyncConfig, options: SyncDepsOptions = {}): Promise<SyncDeps> {
  const now = options.now ?? Date.now;
  const shared = options.now && config.redisUrl === undefined
    ? inMemoryState(now)
    : await openSharedState({ redisUrl: config.redisUrl, prefix: config.redisPrefix, connectionName: 'sync-service' });
  let database: Database<SyncTables>;
  try {
    database = await openDatabase<SyncTables>({
      databaseUrl: config.databaseUrl,
      pgSchema: config.dbSchema,
      dataDir: config.dataDir,
      sqliteFile: SQLITE_FILE,
      service: 'sync',
      migrations: syncMigrations,
    });
  } catch (e: unknown) {
    await shared.close();
    throw e;
  }
  let pushThread: PushThread | undefined;
  try {
    pushThread = database.sqlite ? await startPushThread(path.join(config.dataDir, SQLITE_FILE)) : undefined;
  } catch (e: unknown) {
    await database.close();
    await shared.close();
    throw e;
  }
  const changes = createKyselyChangeStore(database.db, database.dialect, { pushThread });
  // The data directory holds the SQLite file, or on PostgreSQL the uploads being staged; the attachment directory, the files.
  const diskGuard = await createDiskGuard({ dirs: [config.dataDir, ...(config.attachmentDir ? [config.attachmentDir] : [])], minFreeBytes: config.minFreeDiskBytes, service: 'sync' });
  const selfMetrics = createSyncSelfMetrics();
  exposeDiskGuard(selfMetrics, diskGuard);
  return {
    config,
    database,
    accounts: createKyselyAccountStore(database.db, database.dialect),
    businesses: createKyselyBusinessStore(database.db, database.dialect),
    changes,
    attachments: createKyselyAttachmentStore(database.db),
    uploads: createKyselyUploadStore(database.db, database.dialect),
    blobs: database.pgPool && config.attachmentDir === undefined
      ? await createPgBlobStore(database.pgPool, path.join(config.dataDir, 'attachment-staging'))
      : await createLocalBlobStore(config.attachmentDir ?? path.join(config.dataDir, 'attachments')),
    selfMetrics,
    passwordHashes: createHashGate({ concurrency: config.passwordHashConcurrency, queue: config.passwordHashQueue }),
    rateLimiter: shared.rateLimiter,
    pubsub: shared.pubsub,
    redis: shared.redis,
    now,
    diskGuard,
    async close() {
      diskGuard.close();
      await changes.close();
      await shared.close();
      await database.close();
    },
  };
}
