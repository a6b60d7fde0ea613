// Why: "flat memory" is judged on the live heap after a full collection, which a benchmark run without --expose-gc cannot otherwise force.
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Heap in use after a full garbage collection, and the resident set, in MiB. */
export function memoryAfterGc(): { heapMiB: number; rssMiB: number } {
  gc();
  const m = process.memoryUsage();
  return { heapMiB: m.heapUsed / 2 ** 20, rssMiB: m.rss / 2 ** 20 };
}
