import os from 'node:os';

/**
 * V8's default heap sizing is made for throughput on big machines: a young
 * generation of 2 x 16 MiB per isolate and an old generation left to grow to
 * several times what is live. A service that keeps little live data (ours:
 * about 25 MiB) then holds 2-3x that in garbage. These flags size the heap for
 * the service instead; they are V8 startup flags, so a `serve` started without
 * them re-executes itself with them (same process id, same arguments).
 */
const HEAP_FLAGS: readonly string[] = [
  // Young generation 2 x 4 MiB (the writer thread's too): a scavenge every few MiB of short-lived request garbage
  // costs what is still alive, and little is; measured no slower than 16 MiB on the ingest benchmark.
  '--max-semi-space-size=4',
  // The old generation is collected once it grows by 30 % of what survived the last full collection, not by the
  // default's dynamic factor of up to 4x. 50 % held 2-7 MiB more at the peers benchmark's peak; interleaved runs
  // showed no ingest cost for the more frequent collections (docs/benchmarks.md).
  '--heap-growing-percent=30',
];

/**
 * The service's V8 flags on a machine of `cores`. At two cores or fewer the
 * garbage collector works on the thread that needs it only: V8 starts four
 * helper threads whatever the machine, and each scavenge (dozens a second
 * under ingest) wakes them to share work that the event loop, the writer and
 * libuv's pool already keep both cores busy with. Measured on 2 cores (small
 * peers set, eight interleaved runs each): 14 % less CPU per report, 9 % more
 * reports/s, the same peak RSS (docs/benchmarks.md). The JVM picks its serial
 * collector on such machines for the same reason.
 */
export function serviceV8Flags(cores = os.availableParallelism()): string[] {
  return [...HEAP_FLAGS, ...(cores <= 2 ? ['--single-threaded-gc'] : [])];
}

/** A flag's name: `--max-semi-space-size=4` -> `max-semi-space-size`. */
function flagName(flag: string): string {
  const bare = flag.replace(/^--/, '');
  const eq = bare.indexOf('=');
  return eq < 0 ? bare : bare.slice(0, eq);
}

/** Whether the command line already chooses `flag`'s value, its own or the flag's `--no-` form. */
function chosen(given: readonly string[], flag: string): boolean {
  const name = flagName(flag);
  return given.some((g) => {
    const n = flagName(g).replace(/_/g, '-');
    return n === name || n === `no-${name}`;
  });
}

/**
 * glibc gives each thread that allocates its own malloc arena, up to 8 per
 * core, and an arena keeps what it once held. The service's threads (event
 * loop, writer, fold threads, libuv's pool compressing blocks, V8's helper
 * threads) then hold 10-20 MiB more than two shared arenas do, and two 15-20
 * MiB more than one (peers benchmark, full set, interleaved runs: peak
 * 206/209 -> 191/194 MiB; ingest and bulk rates within the runs' noise, each
 * thread's small-block cache keeps most allocations off the arena lock). Read at process start, so set
 * by the same re-execution.
 */
export const SERVICE_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '1' };

/**
 * Re-executes this process with serviceV8Flags() and SERVICE_ENV unless they
 * (or the operator's own choice of the same flags, in the command line or
 * NODE_OPTIONS, or of the same variables) are already in effect. Not done for
 * a process with an IPC channel: the channel does not survive exec, so the
 * launcher that made it passes them itself.
 */
export function execWithServiceHeapFlags(): void {
  if (process.channel || typeof process.execve !== 'function') return;
  const given = [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)].filter((a) => a.startsWith('--'));
  const missing = serviceV8Flags().filter((f) => !chosen(given, f));
  const unset = Object.keys(SERVICE_ENV).filter((k) => process.env[k] === undefined);
  if (!missing.length && !unset.length) return;
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], { ...SERVICE_ENV, ...process.env });
}
