import { coarsen, encodeRollup, rollUpBlocks } from './rollup.js';
import { asBuffer } from './sealer.js';
import type { SqlConn } from './sql-conn.js';
import { TENANT_COARSE_MS, TENANT_FINE_MS, WINDOW_MS } from './windows.js';

/** Windows whose rollup is missing or stale; the WHERE is the partial index's predicate (migration 0007), word for word. */
export const DUE_ROLLUPS = `SELECT tenant_id, window_start, version FROM tenant_windows
  WHERE (rolled_version IS NULL OR rolled_version <> version) AND changed_at <= ? ORDER BY window_start LIMIT ?`;

/** Runs one step of the rollups: the writer's chain of work, which appends join too (on SQLite they share one connection). */
type Turn = <T>(fn: () => Promise<T>) => Promise<T>;

/**
 * A tenant's rollup of one window: every host block of the window rolled up
 * into fine (1 min) and coarse (1 h) cells and summed over hosts, so the fleet
 * average reads one row per window instead of one block per host. A seal bumps
 * the window's version; a rollup is current only while rolled_version equals
 * it, and it is stored only if no seal changed the window while it was being
 * computed (the version is read before the blocks, the update is conditional
 * on it), so it can lag a seal but never be wrong. On PostgreSQL an instance
 * rolls a window up only while it holds that window's row (SKIP LOCKED), so two
 * instances never compute the same rollup. Each window is one `turn`, so
 * appends commit between two windows' rollups (a window of a thousand hosts is
 * a thousand blocks to fold) instead of after all of them.
 */
export async function rollTenantWindows(conn: SqlConn, wallNow: number, settleMs: number, limit: number, turn: Turn): Promise<number> {
  const due = await turn(() => conn.all<{ tenant_id: string; window_start: number; version: number }>(DUE_ROLLUPS, [wallNow - settleMs, limit]));
  let done = 0;
  for (const w of due) {
    done += await turn(() => conn.transaction(async (tx) => {
      if (tx.dialect === 'postgres') {
        const [mine] = await tx.all<{ version: number }>(
          'SELECT version FROM tenant_windows WHERE tenant_id = ? AND window_start = ? AND version = ? FOR UPDATE SKIP LOCKED', [w.tenant_id, w.window_start, w.version]);
        if (!mine) return 0;
      }
      const blocks = await tx.all<{ data: Uint8Array }>(
        'SELECT b.data FROM blocks b JOIN hosts h ON h.key = b.host_key WHERE h.tenant_id = ? AND b.window_start = ?', [w.tenant_id, w.window_start]);
      const fine = rollUpBlocks(blocks.map((b) => b.data), Number(w.window_start), WINDOW_MS, TENANT_FINE_MS);
      const coarse = coarsen(fine, TENANT_COARSE_MS);
      return tx.run(
        'UPDATE tenant_windows SET fine = ?, coarse = ?, rolled_version = ? WHERE tenant_id = ? AND window_start = ? AND version = ?',
        [asBuffer(encodeRollup(fine)), asBuffer(encodeRollup(coarse)), w.version, w.tenant_id, w.window_start, w.version]);
    }, { relaxed: true })); // derived from durable blocks: a rollup lost in a crash is computed again
  }
  return done;
}
