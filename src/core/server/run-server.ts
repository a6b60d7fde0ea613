import type { App } from '../http/create-app.js';
import { isAddressInUse } from '../cli/cli-error.js';

export interface RunServerOptions {
  host: string;
  port: number;
  /** SIGTERM waits this long for in-flight work before exiting anyway. */
  shutdownTimeoutMs: number;
  /** Called after the HTTP server is closed (flush queues, close the database). */
  onShutdown?: () => Promise<void>;
}

/**
 * Listens and installs SIGTERM/SIGINT/SIGHUP handling: stop accepting, let in-flight
 * requests finish (Fastify's close), run `onShutdown`, exit. A second signal or
 * the timeout forces the exit.
 */
export async function runServer(app: App, opts: RunServerOptions): Promise<string> {
  let address: string;
  try {
    address = await app.listen({ host: opts.host, port: opts.port });
  } catch (e: unknown) {
    // A port in use is the callers' to explain; any other failure ("getaddrinfo ENOTFOUND", EADDRNOTAVAIL, EACCES)
    // reads as a listen failure only once it names the address and what was tried.
    if (isAddressInUse(e)) throw e;
    throw new Error(`cannot listen on ${opts.host}:${opts.port}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) {
      app.log.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      app.log.error({ timeoutMs: opts.shutdownTimeoutMs }, 'shutdown timed out, exiting');
      process.exit(1);
    }, opts.shutdownTimeoutMs);
    timer.unref();
    try {
      await app.close();
      await opts.onShutdown?.();
      clearTimeout(timer);
      process.exit(0);
    } catch (e: unknown) {
      app.log.error({ err: e }, 'error during shutdown');
      process.exit(1);
    }
  };
  // SIGHUP too (a closed terminal): its default is to die on the spot, and the service has no configuration to reload.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(signal, () => void shutdown(signal));
  return address;
}
