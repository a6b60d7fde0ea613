import type { AppendOutcome, MetricLimits, NewReport } from '../../domain/metrics-store.js';
import { chunks } from '../../../core/storage/chunks.js';
import { encodeSamples } from '../sample-codec.js';
import { HeadWindows } from './head-windows.js';
import { runAgainWhenUndone, type SqlConn } from './sql-conn.js';
import { loadSealedMeta, type SealedTimestamps } from './sealed-timestamps.js';
import { windowOf } from './windows.js';

/**
 * The ingest path: appends a batch of reports to the durable head (`reports`)
 * in one transaction. Append-only: a report inserts its own row and touches no
 * row another report (or another instance) updates, so instances on one
 * PostgreSQL add throughput instead of queueing on row locks. What is shared
 * (metric names, hosts, a host's name set) is written only when a report
 * brings something new, which after the first minutes is almost never; the
 * caches below make the common report cost one INSERT.
 *
 * Caches are per instance and only ever lag the database (names and hosts are
 * never renamed; retention deletes hosts, which is handled on the foreign-key
 * error and forgotten after each sweep): a limit is always judged on a fresh
 * read, on PostgreSQL one taken under a lock on the tenant's names and hosts
 * (or the host's names: lockForLimits).
 */
/**
 * A report as the writer stores it: its metric names and their values,
 * position for position. Reports with the same names share one `names`
 * array (they crossed from the HTTP thread as a shape number, worker-protocol.ts).
 */
export type HeadReport = Omit<NewReport, 'metrics'> & { names: readonly string[]; values: ArrayLike<number> };

export interface WriterState {
  nameIds: Map<string, Map<string, number>>;
  hosts: Map<string, CachedHost>;
  hostMetricIds: Map<number, Set<number>>;
  /** Wall time of the last append per host key: the sealer leaves a window alone while it is being filled. */
  lastAppend: Map<number, number>;
  /** Smoothed wall-clock gap between a host's appends: "quiet" is judged against the host's own pace. */
  appendGap: Map<number, number>;
  /** The windows with head rows, for the seal passes. */
  headWindows: HeadWindows;
}

interface CachedHost {
  key: number;
  hostname: string;
  platform: string;
}

export function newWriterState(): WriterState {
  return { nameIds: new Map(), hosts: new Map(), hostMetricIds: new Map(), lastAppend: new Map(), appendGap: new Map(), headWindows: new HeadWindows() };
}

/**
 * Drops the caches' entries of hosts no longer in the database: retention removed them (this instance's sweep or
 * another's). Without it the caches grew by about 1 KB for every host ever seen, hosts that came and went (autoscaled
 * machines) included. The sweep calls it: one look at the cached keys an hour, none per report.
 */
export async function forgetGoneHosts(conn: SqlConn, state: WriterState): Promise<void> {
  const cached = new Set(state.lastAppend.keys());
  for (const h of state.hosts.values()) cached.add(h.key);
  for (const key of state.hostMetricIds.keys()) cached.add(key);
  const gone = new Set(cached);
  for (const chunk of chunks([...cached])) {
    const kept = await conn.all<{ key: number }>(`SELECT key FROM hosts WHERE key IN (${chunk.map(() => '?').join(',')})`, chunk);
    for (const r of kept) gone.delete(Number(r.key));
  }
  if (!gone.size) return;
  for (const [k, h] of state.hosts) if (gone.has(h.key)) state.hosts.delete(k);
  for (const key of gone) {
    state.hostMetricIds.delete(key);
    state.lastAppend.delete(key);
    state.appendGap.delete(key);
  }
}

export interface WriterDeps {
  conn: SqlConn;
  state: WriterState;
  limits: MetricLimits;
  sealed: SealedTimestamps;
  wallNow: () => number;
  /** The service clock, which seals judge a window closed by: a report of a window it has ended may meet a seal. */
  now: () => number;
  /**
   * The append's commit does not wait for the disk itself: the caller makes it durable before it answers
   * (engine-writer.ts: an fsync of SQLite's WAL off the writer thread, so the next batch commits meanwhile).
   */
  syncedByCaller?: boolean;
}

/**
 * Stores a batch; one outcome per report, in order. A report that fails on
 * its own (a constraint the validation did not foresee) is isolated: the
 * batch is split and retried, so it never fails another tenant's report.
 */
export async function appendBatch(deps: WriterDeps, batch: HeadReport[]): Promise<Array<AppendOutcome | { status: 'error'; error: unknown }>> {
  try {
    return await appendWithRetry(deps, batch);
  } catch (e: unknown) {
    if (batch.length === 1) return [{ status: 'error', error: e }];
    const half = Math.ceil(batch.length / 2);
    return [...await appendBatch(deps, batch.slice(0, half)), ...await appendBatch(deps, batch.slice(half))];
  }
}

function appendWithRetry(deps: WriterDeps, batch: HeadReport[]): Promise<AppendOutcome[]> {
  return runAgainWhenUndone(async () => {
    const after: Array<() => void> = [];
    const out = await deps.conn.transaction((c) => appendInTransaction({ ...deps, conn: c }, batch, after), { relaxed: deps.syncedByCaller === true });
    for (const apply of after) apply();
    return out;
  }, (e) => {
    const code = (e as { code?: unknown }).code;
    if (code !== '23503' && code !== 'SQLITE_CONSTRAINT_FOREIGNKEY') return false;
    // Retention removed a cached host meanwhile: forget the caches and create it again.
    deps.state.hosts.clear();
    deps.state.hostMetricIds.clear();
    return true;
  });
}

async function appendInTransaction(deps: WriterDeps, batch: HeadReport[], after: Array<() => void>): Promise<AppendOutcome[]> {
  const { conn, state, limits } = deps;
  const outcomes: AppendOutcome[] = new Array(batch.length);
  const byTenant = groupByTenant(batch);
  const ids = new Map<string, Map<string, number>>();
  const hosts = new Map<string, CachedHost>();
  const hostSets = new Map<number, Set<number>>();
  // Tenant locks first, in tenant order, then host locks in (tenant, host) order: two appends never wait in a cycle.
  for (const tenantId of [...byTenant.keys()].sort(cmp)) {
    const reports = byTenant.get(tenantId)!;
    const { ids: tenantIds, missing } = await loadNameIds(conn, state, tenantId, reports);
    const { found, missing: newHosts } = await loadHosts(conn, state, tenantId, reports);
    // A host taking up a name it did not hold may take the tenant past its limit (when no other host holds the name):
    // judged under the tenant's lock too, as new names and hosts are.
    if (conn.dialect === 'postgres' && (missing.length || newHosts.length || takesUpNames(reports, found, tenantIds, state))) {
      await lockForLimits(conn, `tenant\n${tenantId}`);
      // Names and hosts another append created while this one waited: known now, and counted.
      if (missing.length) await lookUpNames(conn, tenantId, missing, tenantIds);
      if (newHosts.length) await lookUpHosts(conn, tenantId, newHosts, found);
    }
    ids.set(tenantId, tenantIds);
    for (const [hostId, host] of found) hosts.set(`${tenantId}\0${hostId}`, host);
  }
  /** PostgreSQL: the hosts whose names this transaction holds the lock of. */
  const lockedHosts = new Set<string>();
  const uncachedKeys = [...hosts.values()].map((h) => h.key).filter((k) => !state.hostMetricIds.has(k));
  for (const [key, set] of await loadHostMetricIds(conn, uncachedKeys)) hostSets.set(key, set);
  if (conn.dialect === 'postgres') await lockHostsOfEndedWindows(conn, batch, hosts, windowOf(deps.now()));
  // Reports for windows already sealed: their duplicates are looked up in the blocks, all in one query.
  const sealedMeta = await loadSealedMeta(conn, batch.flatMap((r) => {
    const h = hosts.get(`${r.tenantId}\0${r.hostId}`);
    return h ? [[h.key, windowOf(r.ts)] as [number, number]] : [];
  }));

  const seen = new Set<string>();
  const rows: Array<{ index: number; hostKey: number; report: HeadReport; samples: Uint8Array }> = [];
  const tenantCounts = new Map<string, number>();
  /** Hosts per tenant, read when a report of a new host is first judged, then kept up to date by the batch. */
  const hostCounts = new Map<string, number>();
  // Hosts and names are created in one order on every instance (tenant, host), so two instances creating the
  // same new hosts never wait on each other in a cycle (a deadlock PostgreSQL would break after a second). A host's
  // reports go oldest first, so the newest that renames it renames it last.
  const order = [...batch.keys()].sort((a, b) => cmp(batch[a]!.tenantId, batch[b]!.tenantId) || cmp(batch[a]!.hostId, batch[b]!.hostId) || batch[a]!.ts - batch[b]!.ts || a - b);
  for (const index of order) {
    const report = batch[index]!;
    const seenKey = `${report.tenantId}\0${report.hostId}\0${report.ts}`;
    // An earlier report of the batch at this (host, ts) that will be stored (one a limit refused stores nothing).
    if (seen.has(seenKey)) { outcomes[index] = { status: 'duplicate' }; continue; }
    const tenantIds = ids.get(report.tenantId)!;
    const hostMapKey = `${report.tenantId}\0${report.hostId}`;
    let host = hosts.get(hostMapKey);
    // The common report brings no new name: one pass finds its ids, and the host's set is shared, not copied.
    let hostIds = host ? hostSets.get(host.key) ?? state.hostMetricIds.get(host.key) : undefined;
    const { names } = report;
    const metricIds = new Array<number>(names.length);
    let unknown: string[] | undefined;
    let fresh = hostIds === undefined;
    for (let at = 0; at < names.length; at++) {
      const id = tenantIds.get(names[at]!);
      if (id === undefined) (unknown ??= []).push(names[at]!);
      else if (!fresh && !hostIds!.has(id)) fresh = true;
      metricIds[at] = id ?? -1;
    }
    // A report that would change what is shared (register names, rename its host) is first looked for: a duplicate
    // changes nothing, and is answered as one before anything is written or judged against a limit. The common
    // report changes nothing shared, and its duplicate is found by the head insert (or the sealed check below).
    const renames = host !== undefined && (host.hostname !== report.hostname || host.platform !== report.platform);
    if (host && (unknown || fresh || renames) && await storedAlready(deps, sealedMeta, host.key, report.ts)) {
      outcomes[index] = { status: 'duplicate' };
      continue;
    }
    // Only a report of a new host counts the tenant's hosts (under the tenant's lock on PostgreSQL, taken above).
    if (!host) {
      const count = hostCounts.get(report.tenantId) ?? await countTenantHosts(conn, report.tenantId);
      hostCounts.set(report.tenantId, count);
      if (count + 1 > limits.hostsPerTenant) {
        outcomes[index] = { status: 'limit_exceeded', details: `the report's new host ${report.hostId} would take the tenant to ${count + 1} hosts; the limit is ${limits.hostsPerTenant}` };
        continue;
      }
    }
    if (unknown) fresh = true;
    let newForHost: string[] = [];
    let joining = 0;
    if (fresh) {
      if (conn.dialect === 'postgres') {
        if (!lockedHosts.has(hostMapKey)) {
          lockedHosts.add(hostMapKey);
          await lockForLimits(conn, `host\n${report.tenantId}\n${report.hostId}`);
        }
        // Read under the lock: every name another append gave the host is committed and seen (and this batch's own).
        hostIds = await loadNamesOfHost(conn, report.tenantId, report.hostId);
      } else if (host && !hostSets.has(host.key)) {
        // The cache may lag another instance's writes: judge the limit on a fresh read.
        hostIds = (await loadHostMetricIds(conn, [host.key])).get(host.key);
      }
      const known = hostIds ?? new Set<number>();
      newForHost = names.filter((n) => { const id = tenantIds.get(n); return id === undefined || !known.has(id); });
      // The tenant's limit (judged first) counts the names its hosts hold: a name that only hosts removed by retention
      // held is free again, and counts anew when a host takes it up (its id is kept: blocks and caches refer to it).
      const knownIds = newForHost.flatMap((n) => { const id = tenantIds.get(n); return id === undefined ? [] : [id]; });
      joining = newForHost.length && newForHost.length - (knownIds.length ? await countHeld(conn, knownIds) : 0);
      if (joining) {
        const count = tenantCounts.get(report.tenantId) ?? await countTenantNames(conn, report.tenantId);
        tenantCounts.set(report.tenantId, count);
        if (count + joining > limits.perTenant) {
          outcomes[index] = { status: 'limit_exceeded', details: `the report would take the tenant to ${count + joining} distinct metric names; the limit is ${limits.perTenant}` };
          continue;
        }
      }
      if (known.size + newForHost.length > limits.perHost) {
        outcomes[index] = { status: 'limit_exceeded', details: `the report would take host ${report.hostId} to ${known.size + newForHost.length} distinct metric names; the limit is ${limits.perHost}` };
        continue;
      }
    }
    seen.add(seenKey);
    if (unknown) {
      await insertNames(conn, report.tenantId, unknown, tenantIds);
      for (let i = 0; i < names.length; i++) if (metricIds[i] === -1) metricIds[i] = tenantIds.get(names[i]!)!;
    }
    if (!host) {
      host = await insertHost(conn, report);
      hosts.set(hostMapKey, host);
      const count = hostCounts.get(report.tenantId);
      if (count !== undefined) hostCounts.set(report.tenantId, count + 1);
    } else if (renames && await renameHost(conn, host.key, report)) {
      host = { ...host, hostname: report.hostname, platform: report.platform };
      hosts.set(hostMapKey, host);
    }
    if (newForHost.length) {
      const newIds = newForHost.map((n) => tenantIds.get(n)!);
      await insertHostMetrics(conn, host.key, newIds);
      if (joining) tenantCounts.set(report.tenantId, tenantCounts.get(report.tenantId)! + joining);
      // A new set: the cached one stays as it was until this transaction commits.
      hostIds = new Set(hostIds);
      for (const id of newIds) hostIds.add(id);
    }
    hostSets.set(host.key, hostIds ?? new Set());
    const block = deps.sealed.spanning(sealedMeta, host.key, report.ts);
    if (block && await deps.sealed.holds(conn, block, host.key, report.ts)) {
      outcomes[index] = { status: 'duplicate' };
      continue;
    }
    rows.push({ index, hostKey: host.key, report, samples: encodeSamples(metricIds, report.values) });
  }

  rows.sort((a, b) => a.index - b.index);
  const inserted = await insertHeadRows(conn, rows);
  const wall = deps.wallNow();
  rows.forEach(({ index, hostKey }, i) => {
    outcomes[index] = { status: inserted[i] ? 'stored' : 'duplicate' };
    if (!inserted[i]) return;
    const last = state.lastAppend.get(hostKey);
    if (last !== undefined) state.appendGap.set(hostKey, 0.8 * (state.appendGap.get(hostKey) ?? wall - last) + 0.2 * (wall - last));
    state.lastAppend.set(hostKey, wall);
  });

  after.push(() => {
    rows.forEach(({ hostKey, report }, i) => { if (inserted[i]) state.headWindows.add(hostKey, windowOf(report.ts)); });
    for (const [tenantId, m] of ids) state.nameIds.set(tenantId, m);
    for (const [k, h] of hosts) state.hosts.set(k, h);
    for (const [key, set] of hostSets) state.hostMetricIds.set(key, set);
  });
  return outcomes;
}

/**
 * PostgreSQL: locks the hosts of the batch's reports whose window has ended (one statement; none for a batch of the
 * open window, nearly every batch). Such a report may meet a seal of its window on another connection or instance.
 * Under read committed the block lookup that follows would not see a seal committing after it, while the head insert
 * waits on the seal's delete of the stored row and then succeeds: the re-sent report would be stored twice and
 * answered as new. FOR SHARE conflicts with the seal's FOR NO KEY UPDATE (which the insert's foreign-key lock does
 * not): a seal under way is waited for and its block seen by the lookup; a seal starting later skips the host (SKIP
 * LOCKED) until this commits, and takes it at a later pass. A window is judged ended by its end, not its end plus the
 * seal's grace, so that instances' clocks may differ by up to the grace. Shared locks never wait on each other; in
 * key order all the same. Two appends both holding a host and both renaming it deadlock: PostgreSQL undoes one, and
 * appendWithRetry runs it again.
 */
async function lockHostsOfEndedWindows(conn: SqlConn, batch: HeadReport[], hosts: Map<string, CachedHost>, openWindow: number): Promise<void> {
  let keys: Set<number> | undefined;
  for (const r of batch) {
    if (r.ts >= openWindow) continue;
    const host = hosts.get(`${r.tenantId}\0${r.hostId}`);
    if (host) (keys ??= new Set()).add(host.key);
  }
  if (keys) await conn.all('SELECT key FROM hosts WHERE key = ANY(?::int[]) ORDER BY key FOR SHARE', [[...keys]]);
}

/** Whether the host already has a report at `ts`, in a sealed block or in the head. */
async function storedAlready(deps: WriterDeps, sealedMeta: Awaited<ReturnType<typeof loadSealedMeta>>, hostKey: number, ts: number): Promise<boolean> {
  const block = deps.sealed.spanning(sealedMeta, hostKey, ts);
  if (block && await deps.sealed.holds(deps.conn, block, hostKey, ts)) return true;
  return (await deps.conn.all('SELECT 1 FROM reports WHERE host_key = ? AND ts = ?', [hostKey, ts])).length > 0;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function groupByTenant(batch: HeadReport[]): Map<string, HeadReport[]> {
  const out = new Map<string, HeadReport[]>();
  for (const r of batch) {
    let list = out.get(r.tenantId);
    if (!list) out.set(r.tenantId, (list = []));
    list.push(r);
  }
  return out;
}

/**
 * The tenant's ids of every name the batch uses: the cache, then one query for what it lacks; `missing`: the names
 * the tenant does not have (yet).
 */
async function loadNameIds(conn: SqlConn, state: WriterState, tenantId: string, reports: HeadReport[]): Promise<{ ids: Map<string, number>; missing: string[] }> {
  const cached = state.nameIds.get(tenantId) ?? new Map<string, number>();
  const wanted = new Set<string>();
  // Reports of one shape share their names array: each list is looked at once.
  for (const names of new Set(reports.map((r) => r.names))) for (const n of names) if (!cached.has(n)) wanted.add(n);
  // Every name known: the cache itself serves the batch (nothing will be added to it). Otherwise a copy, which the
  // batch fills and which replaces the cache only once the batch commits.
  if (!wanted.size) return { ids: cached, missing: [] };
  const out = new Map(cached);
  await lookUpNames(conn, tenantId, [...wanted], out);
  return { ids: out, missing: [...wanted].filter((n) => !out.has(n)) };
}

async function lookUpNames(conn: SqlConn, tenantId: string, names: string[], into: Map<string, number>): Promise<void> {
  for (const chunk of chunks(names)) {
    const found = await conn.all<{ id: number; name: string }>(
      `SELECT id, name FROM metric_names WHERE tenant_id = ? AND name IN (${chunk.map(() => '?').join(',')})`, [tenantId, ...chunk]);
    for (const f of found) into.set(f.name, f.id);
  }
}

/**
 * PostgreSQL: serialises, across connections and instances, the appends that give a tenant names or hosts (or a host
 * names) it does not have, until this transaction ends. Under read committed a count cannot see another append's
 * uncommitted names or hosts, so two appends each judging the limit alone would together pass it. Taken only by a
 * report that brings new names or a new host, which after a host's first minutes is almost never. One-key space (the
 * alert store's host locks use two keys); a collision of two hashes only makes them take turns.
 */
async function lockForLimits(conn: SqlConn, what: string): Promise<void> {
  await conn.all('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`metric-names\n${what}`]);
}

/** The host's metric ids, by its id (the host may have been created since the batch looked it up). */
async function loadNamesOfHost(conn: SqlConn, tenantId: string, hostId: string): Promise<Set<number>> {
  const rows = await conn.all<{ metric_id: number }>(
    'SELECT n.metric_id FROM host_metric_names n JOIN hosts h ON h.key = n.host_key WHERE h.tenant_id = ? AND h.host_id = ?', [tenantId, hostId]);
  return new Set(rows.map((r) => r.metric_id));
}

/** The batch's hosts of a tenant, by host id: the cache, then one query for what it lacks; `missing`: the new ones. */
async function loadHosts(conn: SqlConn, state: WriterState, tenantId: string, reports: HeadReport[]): Promise<{ found: Map<string, CachedHost>; missing: string[] }> {
  const found = new Map<string, CachedHost>();
  const wanted = new Set<string>();
  for (const r of reports) {
    const cached = state.hosts.get(`${tenantId}\0${r.hostId}`);
    if (cached) found.set(r.hostId, cached);
    else wanted.add(r.hostId);
  }
  await lookUpHosts(conn, tenantId, [...wanted], found);
  return { found, missing: [...wanted].filter((h) => !found.has(h)) };
}

async function lookUpHosts(conn: SqlConn, tenantId: string, hostIds: string[], into: Map<string, CachedHost>): Promise<void> {
  for (const chunk of chunks(hostIds)) {
    const rows = await conn.all<{ key: number; host_id: string; hostname: string; platform: string }>(
      `SELECT key, host_id, hostname, platform FROM hosts WHERE tenant_id = ? AND host_id IN (${chunk.map(() => '?').join(',')})`, [tenantId, ...chunk]);
    for (const f of rows) into.set(f.host_id, { key: f.key, hostname: f.hostname, platform: f.platform });
  }
}

async function loadHostMetricIds(conn: SqlConn, keys: number[]): Promise<Map<number, Set<number>>> {
  const out = new Map<number, Set<number>>(keys.map((k) => [k, new Set<number>()]));
  for (const chunk of chunks(keys)) {
    const rows = await conn.all<{ host_key: number; metric_id: number }>(
      `SELECT host_key, metric_id FROM host_metric_names WHERE host_key IN (${chunk.map(() => '?').join(',')})`, chunk);
    for (const r of rows) out.get(r.host_key)!.add(r.metric_id);
  }
  return out;
}

/** Whether a report of a known host carries a name its cached names lack (or its names are not cached yet). */
function takesUpNames(reports: HeadReport[], found: Map<string, CachedHost>, tenantIds: Map<string, number>, state: WriterState): boolean {
  return reports.some((r) => {
    const host = found.get(r.hostId);
    const held = host && state.hostMetricIds.get(host.key);
    if (!held) return true;
    return r.names.some((n) => { const id = tenantIds.get(n); return id === undefined || !held.has(id); });
  });
}

async function countTenantHosts(conn: SqlConn, tenantId: string): Promise<number> {
  const [r] = await conn.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM hosts WHERE tenant_id = ?', [tenantId]);
  return Number(r?.n ?? 0);
}

/** The tenant's names some host of it holds (this transaction's own additions included). */
async function countTenantNames(conn: SqlConn, tenantId: string): Promise<number> {
  const [r] = await conn.all<{ n: number | string }>(
    'SELECT COUNT(*) AS n FROM metric_names mn WHERE mn.tenant_id = ? AND EXISTS (SELECT 1 FROM host_metric_names hm WHERE hm.metric_id = mn.id)', [tenantId]);
  return Number(r?.n ?? 0);
}

/** How many of the names `ids` (of one tenant: an id is its tenant's) some host holds. */
async function countHeld(conn: SqlConn, ids: number[]): Promise<number> {
  let n = 0;
  for (const chunk of chunks(ids)) {
    const [r] = await conn.all<{ n: number | string }>(
      `SELECT COUNT(DISTINCT metric_id) AS n FROM host_metric_names WHERE metric_id IN (${chunk.map(() => '?').join(',')})`, chunk);
    n += Number(r?.n ?? 0);
  }
  return n;
}

async function insertNames(conn: SqlConn, tenantId: string, names: string[], into: Map<string, number>): Promise<void> {
  for (const chunk of chunks([...names].sort(cmp))) {
    const marks = chunk.map(() => '?').join(',');
    await conn.run(`INSERT INTO metric_names (tenant_id, name) VALUES ${chunk.map(() => '(?, ?)').join(',')} ON CONFLICT (tenant_id, name) DO NOTHING`,
      chunk.flatMap((n) => [tenantId, n]));
    const found = await conn.all<{ id: number; name: string }>(`SELECT id, name FROM metric_names WHERE tenant_id = ? AND name IN (${marks})`, [tenantId, ...chunk]);
    for (const f of found) into.set(f.name, f.id);
  }
}

async function insertHost(conn: SqlConn, r: HeadReport): Promise<CachedHost> {
  // A concurrent instance may create the same host first: keep its row and read its key.
  await conn.run('INSERT INTO hosts (tenant_id, host_id, hostname, platform, last_ts) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, host_id) DO NOTHING',
    [r.tenantId, r.hostId, r.hostname, r.platform, r.ts]);
  const [row] = await conn.all<{ key: number; hostname: string; platform: string }>(
    'SELECT key, hostname, platform FROM hosts WHERE tenant_id = ? AND host_id = ?', [r.tenantId, r.hostId]);
  return row!;
}

/**
 * A new hostname or platform, unless the host has a newer report (in the head or a block: an ordinary report does not
 * move last_ts, which is the ts of the report that set them). Whether it renamed. Only a report whose names differ
 * from the cached ones runs it, so the look for a newer report costs nothing per ordinary report.
 */
async function renameHost(conn: SqlConn, key: number, r: HeadReport): Promise<boolean> {
  return (await conn.run(
    `UPDATE hosts SET hostname = ?, platform = ?, last_ts = ? WHERE key = ? AND last_ts <= ?
       AND NOT EXISTS (SELECT 1 FROM reports WHERE host_key = ? AND ts > ?)
       AND NOT EXISTS (SELECT 1 FROM blocks WHERE host_key = ? AND window_start >= ? AND max_ts > ?)`,
    [r.hostname, r.platform, r.ts, key, r.ts, key, r.ts, key, windowOf(r.ts), r.ts])) > 0;
}

async function insertHostMetrics(conn: SqlConn, hostKey: number, ids: number[]): Promise<void> {
  for (const chunk of chunks(ids)) {
    await conn.run(`INSERT INTO host_metric_names (host_key, metric_id) VALUES ${chunk.map(() => '(?, ?)').join(',')} ON CONFLICT (host_key, metric_id) DO NOTHING`,
      chunk.flatMap((id) => [hostKey, id]));
  }
}

/** Inserts head rows; true where the row is new, false where (host, ts) was already there. */
async function insertHeadRows(conn: SqlConn, rows: Array<{ hostKey: number; report: HeadReport; samples: Uint8Array }>): Promise<boolean[]> {
  if (conn.dialect === 'sqlite') {
    const changed = await conn.runEach('INSERT INTO reports (host_key, ts, samples) VALUES (?, ?, ?) ON CONFLICT (host_key, ts) DO NOTHING',
      rows.map((r) => [r.hostKey, r.report.ts, r.samples]));
    return changed.map((n) => n > 0);
  }
  const done = new Set<string>();
  for (const chunk of chunks(rows, 1000)) {
    // One prepared statement for any batch size: arrays unnested server-side.
    const got = await conn.all<{ host_key: number; ts: number }>(
      'INSERT INTO reports (host_key, ts, samples) SELECT * FROM unnest(?::int[], ?::bigint[], ?::bytea[]) ON CONFLICT (host_key, ts) DO NOTHING RETURNING host_key, ts',
      [chunk.map((r) => r.hostKey), chunk.map((r) => r.report.ts), chunk.map((r) => Buffer.from(r.samples.buffer, r.samples.byteOffset, r.samples.byteLength))]);
    for (const g of got) done.add(`${g.host_key}\0${g.ts}`);
  }
  return rows.map((r) => done.has(`${r.hostKey}\0${r.report.ts}`));
}
