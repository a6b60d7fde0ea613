import { CompiledQuery, sql, type Kysely } from 'kysely';
import { heldReader, type SqlConn, type SqlReader } from '../storage/engine/sql-conn.js';
import type { Severity } from './alert.js';

/**
 * The table behind `AlertStore`, created by migration 0004_alerts (one open incident per fingerprint since
 * 0008_alerts_open_unique; `resolve_pending` since 0009_alerts_resolve_pending).
 */
export type AlertTables = {
  alerts: {
    id: number;
    tenant_id: string;
    host_id: string;
    fingerprint: string;
    name: string;
    severity: string;
    message: string | null;
    labels: string;
    value: number | null;
    threshold: number | null;
    starts_at: number;
    last_seen_at: number;
    resolved_at: number | null;
    created_at: number;
    routes: string;
    resolve_pending: number;
  };
};

/** What the last notification of one incident to one route did. */
export interface RouteNotification {
  /** Server time of the last firing notification attempt. */
  notifiedAt: number;
  /** `sending`: claimed by the report now delivering it; no other report sends it meanwhile. */
  outcome: 'delivered' | 'failed' | 'sending';
  status?: number;
  error?: string;
  /**
   * Server time of the last firing notification the route delivered, kept when a later one fails: a route that has
   * heard of the incident gets its resolved notification whatever the last attempt did. Absent on incidents stored
   * before it was kept; there `outcome: 'delivered'` says the same.
   */
  deliveredAt?: number;
  /**
   * Set once the resolved notification was attempted (whatever its outcome): `at` the last attempt, `since` the
   * first (absent: the same), from which its retries are bounded.
   */
  resolved?: { at: number; since?: number; outcome: 'delivered' | 'failed' | 'sending'; status?: number; error?: string };
}

/**
 * One incident: an alert (same host, name, severity and agent labels) from
 * the first report that carried it until the first report of its host that
 * did not. `startsAt`, `lastSeenAt` and `resolvedAt` are report times;
 * `createdAt` is the server time the incident was first stored (group_wait
 * counts from it, so a drained spool of old reports does not skip the wait).
 */
export interface StoredAlert {
  id: number;
  tenantId: string;
  hostId: string;
  fingerprint: string;
  name: string;
  severity: Severity;
  message: string | null;
  labels: Record<string, string>;
  value: number | null;
  threshold: number | null;
  startsAt: number;
  lastSeenAt: number;
  resolvedAt: number | null;
  createdAt: number;
  /** Route name -> notification state; routes that never matched are absent. Always from `routeStates`. */
  routes: Record<string, RouteNotification>;
  /** Resolved, and a route's resolved notification is still to be delivered (failed, or claimed and in flight). */
  resolvePending: boolean;
}

export type NewAlert = Omit<StoredAlert, 'id'>;

/**
 * An incident's route states, keyed by route name without a prototype: a route may be named `toString`,
 * `constructor` or `__proto__`, which a plain object would answer from Object.prototype (or take as its prototype).
 */
export function routeStates(stored: Record<string, RouteNotification> = {}): Record<string, RouteNotification> {
  return Object.assign(Object.create(null) as Record<string, RouteNotification>, stored);
}

export interface AlertQuery {
  hostId?: string | undefined;
  /** Incidents active at some point in [from, to]: started at or before `to`, not resolved before `from`. */
  from: number;
  to: number;
  limit: number;
}

/** One host's incidents while `AlertStore.forHost` holds the host: reads see what is committed, writes commit together. */
export interface HostAlerts {
  /** The host's incidents that are not resolved, and the resolved ones whose resolved notification is pending; oldest first. */
  open(): Promise<StoredAlert[]>;
  /** The host's incidents with these ids, open or resolved. */
  byIds(ids: number[]): Promise<StoredAlert[]>;
  /** How many stored reports of the host are newer than `ts`, read in the hold's transaction. */
  reportsAfter(ts: number): Promise<number>;
  /**
   * Stores new incidents of the host and the mutable fields of known ones (last seen, value, message, resolution,
   * route state); resolves the new incidents' ids, in order. At most one incident per fingerprint is open: opening a
   * second fails (a unique index, migration 0008_alerts_open_unique).
   */
  record(changes: { opened: NewAlert[]; updated: StoredAlert[] }): Promise<number[]>;
}

/** Stored alerts, in domain terms. One implementation serves SQLite and PostgreSQL: the SQL is identical but for the hold. */
export interface AlertStore {
  /**
   * The host's incidents that are not resolved, and the resolved ones whose resolved notification is pending, oldest
   * first, as committed when the read ran; holds nothing.
   */
  firing(tenantId: string, hostId: string): Promise<StoredAlert[]>;
  /**
   * Runs `fn` in one transaction holding the host against every other `forHost` of it, on any instance
   * (PostgreSQL: an advisory transaction lock on the host; SQLite: BEGIN IMMEDIATE), so concurrent reports of one
   * host take turns reading and changing its incidents. Keep `fn` short, with no network: the host's reports wait.
   */
  forHost<T>(tenantId: string, hostId: string, fn: (host: HostAlerts) => Promise<T>): Promise<T>;
  /** The tenant's incidents in the range, newest start first, at most `limit`; never another tenant's. */
  list(tenantId: string, q: AlertQuery): Promise<StoredAlert[]>;
  /**
   * Retention: deletes the incidents that ended before `cutoff` (resolved before it, or open and last seen before
   * it), of every tenant; returns how many.
   */
  deleteEndedBefore(cutoff: number): Promise<number>;
}

/**
 * An incident that ended before the cutoff also began before it, so each tenant's range of start times
 * (`alerts_tenant_starts`) reaches it: the sweep reads the incidents older than the retention, not the whole table.
 * Parameters: the cutoff, twice.
 */
export const DELETE_ENDED_SQL = 'DELETE FROM alerts WHERE tenant_id IN (SELECT id FROM tenants) AND starts_at < ? AND COALESCE(resolved_at, last_seen_at) < ?';

type Row = AlertTables['alerts'];

function fromRow(r: Row): StoredAlert {
  return {
    id: Number(r.id),
    tenantId: r.tenant_id,
    hostId: r.host_id,
    fingerprint: r.fingerprint,
    name: r.name,
    severity: r.severity as Severity,
    message: r.message,
    labels: JSON.parse(r.labels) as Record<string, string>,
    value: r.value === null ? null : Number(r.value),
    threshold: r.threshold === null ? null : Number(r.threshold),
    startsAt: Number(r.starts_at),
    lastSeenAt: Number(r.last_seen_at),
    resolvedAt: r.resolved_at === null ? null : Number(r.resolved_at),
    createdAt: Number(r.created_at),
    routes: routeStates(JSON.parse(r.routes) as Record<string, RouteNotification>),
    resolvePending: Number(r.resolve_pending) === 1,
  };
}

/** Most hosts one statement reads the open incidents of (the rest of a larger batch takes another). */
export const FIRING_BATCH = 256;

/**
 * The open and resolve-pending incidents of a list of hosts: pairs as one JSON array (SQLite) or two arrays
 * (PostgreSQL), so the text is fixed. Two branches, each with the predicate of its partial index (the hosts
 * are passed once per branch).
 */
const FIRING_SQL = {
  sqlite: `SELECT a.* FROM json_each(?) AS h JOIN alerts AS a
      ON a.tenant_id = json_extract(h.value, '$[0]') AND a.host_id = json_extract(h.value, '$[1]') AND a.resolved_at IS NULL
    UNION ALL
    SELECT a.* FROM json_each(?) AS h JOIN alerts AS a
      ON a.tenant_id = json_extract(h.value, '$[0]') AND a.host_id = json_extract(h.value, '$[1]') AND a.resolve_pending = 1
    ORDER BY id`,
  postgres: `SELECT a.* FROM unnest(?::text[], ?::text[]) AS h(tenant_id, host_id) JOIN alerts AS a
      ON a.tenant_id = h.tenant_id AND a.host_id = h.host_id AND a.resolved_at IS NULL
    UNION ALL
    SELECT a.* FROM unnest(?::text[], ?::text[]) AS h(tenant_id, host_id) JOIN alerts AS a
      ON a.tenant_id = h.tenant_id AND a.host_id = h.host_id AND a.resolve_pending = 1
    ORDER BY id`,
};

interface FiringWaiter {
  resolve: (rows: StoredAlert[]) => void;
  reject: (e: unknown) => void;
}

/**
 * `firing`, with the reads asked for in one turn of the event loop sent as one
 * statement. Every stored report asks for its host's open incidents, and a group
 * commit acknowledges dozens of reports at once: on PostgreSQL one round trip
 * per report was a quarter of the event loop's time at 64 reports in flight.
 * A read sees what was committed when its statement ran, as a read of its own would.
 */
function coalescedFiring(conn: SqlConn): AlertStore['firing'] {
  let waiting: Map<string, { tenantId: string; hostId: string; waiters: FiringWaiter[] }> | undefined;
  const read = (hosts: Array<{ tenantId: string; hostId: string }>): Promise<Row[]> => {
    if (conn.dialect === 'sqlite') {
      const pairs = JSON.stringify(hosts.map((h) => [h.tenantId, h.hostId]));
      return conn.all<Row>(FIRING_SQL.sqlite, [pairs, pairs]);
    }
    const tenants = hosts.map((h) => h.tenantId);
    const ids = hosts.map((h) => h.hostId);
    return conn.all<Row>(FIRING_SQL.postgres, [tenants, ids, tenants, ids]);
  };
  const flush = (batch: NonNullable<typeof waiting>) => {
    const hosts = [...batch.values()];
    for (let i = 0; i < hosts.length; i += FIRING_BATCH) {
      const part = hosts.slice(i, i + FIRING_BATCH);
      read(part).then((rows) => {
        const byHost = new Map<string, Row[]>();
        for (const r of rows) {
          const key = hostKey(r.tenant_id, r.host_id);
          const mine = byHost.get(key);
          if (mine) mine.push(r); else byHost.set(key, [r]);
        }
        // Each waiter gets objects of its own: the router changes what it is given.
        for (const h of part) for (const w of h.waiters) w.resolve((byHost.get(hostKey(h.tenantId, h.hostId)) ?? []).map(fromRow));
      }, (e: unknown) => {
        for (const h of part) for (const w of h.waiters) w.reject(e);
      });
    }
  };
  return (tenantId, hostId) => new Promise<StoredAlert[]>((resolve, reject) => {
    if (!waiting) {
      const batch = (waiting = new Map());
      setImmediate(() => { waiting = undefined; flush(batch); });
    }
    const key = hostKey(tenantId, hostId);
    let h = waiting.get(key);
    if (!h) waiting.set(key, (h = { tenantId, hostId, waiters: [] }));
    h.waiters.push({ resolve, reject });
  });
}

/** One host's key in maps of hosts of several tenants. */
export const hostKey = (tenantId: string, hostId: string) => `${tenantId}\0${hostId}`;

/** How many stored reports of a host are newer than `ts`, on the connection given (the storage engine's countHostReportsAfter). */
export type ReportsAfter = (conn: SqlReader, tenantId: string, hostId: string, ts: number) => Promise<number>;

/**
 * `conn` serves the read every stored report makes (its host's open incidents, coalesced): a prepared statement, not Kysely,
 * whose SQLite driver queues concurrent queries behind a mutex that wakes every waiter at each release (64
 * reports in flight: thousands of wake-ups and ~6 KiB of garbage per report). The rest stays on Kysely.
 */
export function createAlertStore(db: Kysely<AlertTables>, conn: SqlConn, reportsAfter: ReportsAfter): AlertStore {
  return {
    firing: coalescedFiring(conn),
    forHost(tenantId, hostId, fn) {
      return db.transaction().execute(async (trx) => {
        // Two int keys: a space of their own, apart from the one-key locks of migrations. A collision of two hosts'
        // hashes only makes them take turns.
        if (conn.dialect === 'postgres') await sql`SELECT pg_advisory_xact_lock(hashtext(${tenantId}), hashtext(${hostId}))`.execute(trx);
        const host = trx.selectFrom('alerts').selectAll().where('tenant_id', '=', tenantId).where('host_id', '=', hostId);
        return fn({
          open: async () => (await host.where((eb) => eb.or([eb('resolved_at', 'is', null), eb('resolve_pending', '=', 1)])).orderBy('id').execute()).map(fromRow),
          byIds: async (ids) => (ids.length ? (await host.where('id', 'in', ids).orderBy('id').execute()).map(fromRow) : []),
          reportsAfter: (ts) => reportsAfter(heldReader(conn.dialect, async (text, params) => (await trx.executeQuery(CompiledQuery.raw(text, [...params]))).rows),
            tenantId, hostId, ts),
          async record({ opened, updated }) {
            // Resolutions first: an incident may open again once the one it follows is resolved.
            for (const a of updated) {
              await trx.updateTable('alerts').set({
                message: a.message, value: a.value, threshold: a.threshold, last_seen_at: a.lastSeenAt,
                resolved_at: a.resolvedAt, routes: JSON.stringify(a.routes), resolve_pending: a.resolvePending ? 1 : 0,
              }).where('id', '=', a.id).where('tenant_id', '=', tenantId).where('host_id', '=', hostId).execute();
            }
            const ids: number[] = [];
            for (const a of opened) {
              const row = await trx.insertInto('alerts').values({
                tenant_id: tenantId, host_id: hostId, fingerprint: a.fingerprint, name: a.name, severity: a.severity,
                message: a.message, labels: JSON.stringify(a.labels), value: a.value, threshold: a.threshold,
                starts_at: a.startsAt, last_seen_at: a.lastSeenAt, resolved_at: a.resolvedAt, created_at: a.createdAt,
                routes: JSON.stringify(a.routes), resolve_pending: a.resolvePending ? 1 : 0,
              } as Row).returning('id').executeTakeFirstOrThrow();
              ids.push(Number(row.id));
            }
            return ids;
          },
        });
      });
    },
    async list(tenantId, q) {
      let query = db.selectFrom('alerts').selectAll().where('tenant_id', '=', tenantId)
        .where('starts_at', '<=', q.to)
        .where((eb) => eb.or([eb('resolved_at', 'is', null), eb('resolved_at', '>=', q.from)]));
      if (q.hostId !== undefined) query = query.where('host_id', '=', q.hostId);
      const rows = await query.orderBy('starts_at', 'desc').orderBy('id', 'desc').limit(q.limit).execute();
      return rows.map(fromRow);
    },
    deleteEndedBefore: (cutoff) => conn.run(DELETE_ENDED_SQL, [cutoff, cutoff]),
  };
}
