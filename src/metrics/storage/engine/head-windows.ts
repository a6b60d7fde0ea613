import type { SqlConn } from './sql-conn.js';
import { WINDOW_MS } from './windows.js';

/**
 * The (host, window) pairs that have rows in the head, kept by the writer as
 * it appends, so a seal pass looks at what it knows instead of grouping the
 * whole head: with 10,000 hosts the head holds a million rows or more, and
 * that scan took over a second every pass (half a second apart), with appends
 * waiting behind it on SQLite (bench/metrics-fleet.ts). A scan of the head
 * fills it at the first pass, and again now and then on PostgreSQL, where
 * other instances append too (windows only they knew of, left by one that
 * stopped). An entry may outlive its rows (sealed by another instance, or a
 * transaction rolled back): a seal that finds no rows forgets it. Each entry
 * carries a generation, bumped by every append, so a seal forgets a window
 * only if nothing was appended to it since the seal read it.
 */
export class HeadWindows {
  private readonly byHost = new Map<number, Map<number, number>>();
  private generation = 0;

  /** Notes that `hostKey` has head rows in the window starting at `windowStart`. */
  add(hostKey: number, windowStart: number): void {
    let windows = this.byHost.get(hostKey);
    if (!windows) this.byHost.set(hostKey, (windows = new Map()));
    windows.set(windowStart, ++this.generation);
  }

  /** Every host with known windows, and its windows (start -> generation). */
  hosts(): Iterable<[hostKey: number, windows: ReadonlyMap<number, number>]> {
    return this.byHost;
  }

  /** Forgets a window whose rows are gone, unless an append came after `generation` was read. */
  forget(hostKey: number, windowStart: number, generation: number): void {
    const windows = this.byHost.get(hostKey);
    if (windows?.get(windowStart) !== generation) return;
    windows.delete(windowStart);
    if (!windows.size) this.byHost.delete(hostKey);
  }
}

/** Adds every (host, window) of the head as it is now. */
export async function scanHead(conn: SqlConn, into: HeadWindows): Promise<void> {
  // Integer division is the window in both dialects.
  const rows = await conn.all<{ host_key: number; window_start: number | string }>(
    `SELECT host_key, (ts / ${WINDOW_MS}) * ${WINDOW_MS} AS window_start FROM reports GROUP BY host_key, ts / ${WINDOW_MS}`);
  for (const r of rows) into.add(r.host_key, Number(r.window_start));
}
