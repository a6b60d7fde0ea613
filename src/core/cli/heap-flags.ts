/**
 * V8's default heap sizing is made for throughput on big machines: a young
 * generation of 2 x 16 MiB per isolate and an old generation left to grow to
 * several times what is live. A service that keeps little live data (ours:
 * about 25 MiB) then holds 2-3x that in garbage. These flags size the heap for
 * the service instead; they are V8 startup flags, so a `serve` started without
 * them re-executes itself with them (same process id, same arguments).
 */
export const SERVICE_V8_FLAGS: readonly string[] = [
  // Young generation 2 x 4 MiB (the writer thread's too): a scavenge every few MiB of short-lived request garbage
  // costs what is still alive, and little is; measured no slower than 16 MiB on the ingest benchmark.
  '--max-semi-space-size=4',
  // The old generation is collected once it grows by 30 % of what survived the last full collection, not by the
  // default's dynamic factor of up to 4x. 50 % held 2-7 MiB more at the peers benchmark's peak; interleaved runs
  // showed no ingest cost for the more frequent collections (docs/benchmarks.md).
  '--heap-growing-percent=30',
];

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
 * Re-executes this process with SERVICE_V8_FLAGS and SERVICE_ENV unless they
 * (or the operator's own choice of the same flags, in the command line or
 * NODE_OPTIONS, or of the same variables) are already in effect. Not done for
 * a process with an IPC channel: the channel does not survive exec, so the
 * launcher that made it passes them itself.
 */
export function execWithServiceHeapFlags(): void {
  if (process.channel || typeof process.execve !== 'function') return;
  const given = `${process.execArgv.join(' ')} ${process.env['NODE_OPTIONS'] ?? ''}`;
  const missing = SERVICE_V8_FLAGS.filter((f) => !given.includes(f.slice(0, f.indexOf('='))));
  const unset = Object.keys(SERVICE_ENV).filter((k) => process.env[k] === undefined);
  if (!missing.length && !unset.length) return;
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], { ...SERVICE_ENV, ...process.env });
}
