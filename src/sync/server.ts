import { runServer } from '../core/server/run-server.js';
import type { SyncConfig } from './config.js';
import { createSyncDeps } from './deps.js';
import { buildSyncApp } from './app.js';
import { removeOrphanBlobs } from './attachments/orphan-blobs.js';

/** Opens the dependencies, builds the app and serves it until SIGTERM/SIGINT, then closes everything. */
export async function startSyncServer(config: SyncConfig): Promise<string> {
  const deps = await createSyncDeps(config);
  try {
    const app = await buildSyncApp(deps);
    const address = await runServer(app, { host: config.host, port: config.port, shutdownTimeoutMs: config.shutdownTimeoutMs, onShutdown: () => deps.close() });
    app.log.info({ address, storage: deps.database.dialect }, 'sync service listening');
    // In the background: it only touches blobs too old to belong to an upload in progress.
    removeOrphanBlobs(deps.blobs, deps.attachments, deps.now()).then(
      (removed) => { if (removed) app.log.warn({ removed }, 'removed attachment blobs that a crash left without their attachment'); },
      (e: unknown) => app.log.error({ err: e }, 'orphan attachment sweep failed'),
    );
    return address;
  } catch (e: unknown) {
    await deps.close();
    throw e;
  }
}
