// Why: at most one open incident per (tenant, host, fingerprint), held by the database; concurrent reports once opened two.
import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

interface OpenRow {
  id: number;
  tenant_id: string;
  host_id: string;
  fingerprint: string;
  message: string | null;
  value: number | null;
  threshold: number | null;
  starts_at: number;
  last_seen_at: number;
  routes: string;
}

/** A route's notification state as 0004 to 0007 stored it (JSON in `routes`), with the fields this merge reads. */
interface RouteState {
  notifiedAt: number;
  outcome: string;
  deliveredAt?: number;
}

const delivered = (s: RouteState): number | undefined => s.deliveredAt ?? (s.outcome === 'delivered' ? s.notifiedAt : undefined);

/**
 * Per route, the state of the duplicates that last delivered (so the route still gets the resolved notification and
 * its repeat counts from that delivery), else the latest attempt; with the latest delivery of any of them.
 */
function mergeRoutes(rows: OpenRow[]): Record<string, RouteState> {
  const merged: Record<string, RouteState> = {};
  for (const row of rows) {
    for (const [route, state] of Object.entries(JSON.parse(row.routes) as Record<string, RouteState>)) {
      const kept = merged[route];
      const rank = (s: RouteState) => [delivered(s) ?? -1, s.notifiedAt];
      const [a, b] = [rank(state), kept ? rank(kept) : [-2, -2]];
      const best = a[0]! > b[0]! || (a[0] === b[0] && a[1]! > b[1]!) ? state : kept!;
      const deliveredAt = Math.max(delivered(state) ?? -1, kept ? delivered(kept) ?? -1 : -1);
      merged[route] = { ...best, ...(deliveredAt >= 0 ? { deliveredAt } : {}) };
    }
  }
  return merged;
}

/**
 * Folds the open duplicates into the oldest of each set (first start, latest sighting, the newest report's value and
 * message, merged route state) and resolves the others at their own last sighting: every row stays, and the kept
 * incident carries on (its resolved notification goes out as usual). Then the partial unique index, whose predicate
 * is the open-incidents read's own, so both databases use it there too.
 */
const up = async (db: Kysely<any>): Promise<void> => {
  const { rows } = await sql<OpenRow>`SELECT a.id, a.tenant_id, a.host_id, a.fingerprint, a.message, a.value, a.threshold,
      a.starts_at, a.last_seen_at, a.routes
    FROM alerts AS a
    WHERE a.resolved_at IS NULL AND EXISTS (SELECT 1 FROM alerts AS b WHERE b.tenant_id = a.tenant_id AND b.host_id = a.host_id
      AND b.fingerprint = a.fingerprint AND b.resolved_at IS NULL AND b.id <> a.id)
    ORDER BY a.id`.execute(db);
  const sets = new Map<string, OpenRow[]>();
  for (const row of rows) {
    const key = JSON.stringify([row.tenant_id, row.host_id, row.fingerprint]);
    sets.set(key, [...(sets.get(key) ?? []), { ...row, id: Number(row.id), starts_at: Number(row.starts_at), last_seen_at: Number(row.last_seen_at) }]);
  }
  for (const set of sets.values()) {
    const [kept, ...extra] = set as [OpenRow, ...OpenRow[]];
    const newest = set.reduce((a, b) => (b.last_seen_at > a.last_seen_at ? b : a));
    for (const row of extra) await sql`UPDATE alerts SET resolved_at = ${row.last_seen_at} WHERE id = ${row.id}`.execute(db);
    await sql`UPDATE alerts SET starts_at = ${Math.min(...set.map((r) => r.starts_at))}, last_seen_at = ${newest.last_seen_at},
      message = ${newest.message}, value = ${newest.value}, threshold = ${newest.threshold}, routes = ${JSON.stringify(mergeRoutes(set))}
      WHERE id = ${kept.id}`.execute(db);
  }
  await sql`CREATE UNIQUE INDEX alerts_open_incident ON alerts (tenant_id, host_id, fingerprint) WHERE resolved_at IS NULL`.execute(db);
};

export const metrics0008: Record<DialectName, Migration> = { sqlite: { up }, postgres: { up } };
