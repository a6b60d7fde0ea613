// Why: services start their worker threads one way, whether they run from the TypeScript sources (tests, tsx) or from the build.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Starts the module `name` (without extension) next to `callerUrl` (the
 * caller's `import.meta.url`) in a worker thread. Run from source, the module
 * is TypeScript too: Node 20 applies no --import loader hooks inside worker
 * threads, so the thread registers tsx's require hook itself and loads the
 * module through it.
 */
export function startModuleWorker(callerUrl: string, name: string, workerData: unknown): Worker {
  const fromSource = callerUrl.endsWith('.ts');
  const entry = new URL(`./${name}${fromSource ? '.ts' : '.js'}`, callerUrl);
  return fromSource
    ? new Worker(`require('tsx/cjs/api').register(); require(${JSON.stringify(fileURLToPath(entry))});`, { eval: true, workerData })
    : new Worker(entry, { workerData });
}
