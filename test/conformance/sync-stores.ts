import { loadSyncConfig } from '../../src/sync/config.js';
import { createSyncDeps, type SyncDeps } from '../../src/sync/deps.js';
import { BACKENDS, freshStorage, type BackendName } from '../helpers/backends.js';

/**
 * The storage implementations of the sync service, one per backend, as
 * powersync-service's `registerDataStorageTests(factory)` takes them: each
 * conformance suite loops over `SYNC_STORE_FACTORIES` and runs the same
 * behaviour tests against every one. The stores are built exactly as the
 * service builds them (`createSyncDeps`), on a fresh database.
 */
export interface SyncStoreFactory {
  name: BackendName;
  /** The stores on a fresh database; `close` also drops the database. */
  open(): Promise<SyncDeps>;
}

export const SYNC_STORE_FACTORIES: SyncStoreFactory[] = BACKENDS.map((backend) => ({
  name: backend,
  async open() {
    const storage = await freshStorage(backend);
    const deps = await createSyncDeps({
      ...loadSyncConfig(),
      dataDir: storage.dataDir,
      databaseUrl: storage.databaseUrl,
      dbSchema: storage.pgSchema,
    }, { now: Date.now });
    return { ...deps, async close() { await deps.close(); await storage.cleanup(); } };
  },
}));
