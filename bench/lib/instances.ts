// Why: the scale-out benchmarks start service instances as processes, wait for them to answer and stop them alike.
import type { ChildProcess } from 'node:child_process';

/** Resolves once `url`/healthz answers 200 (within 30 s). */
export async function waitUp(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(`${url}/healthz`)).ok) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

/** SIGTERM to each, then waits until all have exited. */
export async function stopAll(procs: readonly ChildProcess[]): Promise<void> {
  for (const p of procs) p.kill('SIGTERM');
  await Promise.all(procs.map((p) => new Promise((r) => (p.exitCode !== null ? r(null) : p.once('exit', r)))));
}
