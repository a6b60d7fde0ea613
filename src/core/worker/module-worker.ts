// Why: services start their worker threads one way, whether they run from the TypeScript sources (tests, tsx) or from the build.
import { fileURLToPath } from 'node:url';
import { Worker, type ResourceLimits, type WorkerOptions } from 'node:worker_threads';

/**
 * For threads that keep little alive between messages (a storage writer, a
 * fold thread): a young generation of 3 MiB instead of the process's 12 (the
 * service runs with 2 x 4 MiB semi-spaces). Each thread is its own V8 heap, so
 * this is resident memory saved per thread; the peers benchmark's peak RSS fell
 * by about 6 MiB and its ingest CPU did not move (docs/benchmarks.md).
 */
export const SMALL_YOUNG_GENERATION: ResourceLimits = { maxYoungGenerationSizeMb: 3 };

/**
 * Starts the module `name` (without extension) next to `callerUrl` (the
 * caller's `import.meta.url`) in a worker thread. Run from source, the module
 * is TypeScript too: Node 20 applies no --import loader hooks inside worker
 * threads, so the thread registers tsx's require hook itself and loads the
 * module through it.
 */
export function startModuleWorker(callerUrl: string, name: string, workerData: unknown, resourceLimits?: ResourceLimits): Worker {
  const fromSource = callerUrl.endsWith('.ts');
  const entry = new URL(`./${name}${fromSource ? '.ts' : '.js'}`, callerUrl);
  const options: WorkerOptions = { workerData, ...(resourceLimits && { resourceLimits }) };
  return fromSource
    ? new Worker(`require('tsx/cjs/api').register(); require(${JSON.stringify(fileURLToPath(entry))});`, { ...options, eval: true })
    : new Worker(entry, options);
}
