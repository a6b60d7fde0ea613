import { runServer } from '../core/server/run-server.js';
import { buildMetricsApp } from './app.js';
import type { MetricsConfig } from './config.js';
import { createMetricsDeps } from './deps.js';

/** The metrics service process: open the database, build the app, listen until SIGTERM, then drain and close. */
export async function startMetricsServer(config: MetricsConfig): Promise<string> {
  const deps = await createMetricsDeps(config);
  try {
    const app = await buildMetricsApp(config, deps);
    return await runServer(app, { host: config.host, port: config.port, shutdownTimeoutMs: config.shutdownTimeoutMs, onShutdown: () => deps.close() });
  } catch (e: unknown) {
    await deps.close();
    throw e;
  }
}
