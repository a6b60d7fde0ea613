import { chunks } from '../../../core/storage/chunks.js';
import type { HostLatest } from '../../domain/metrics-store.js';
import { decodeSamples } from '../sample-codec.js';
import type { SqlConn } from './sql-conn.js';
import { TailRows, type TailBlock, type TailBlockRef, type TailRow } from './tail-rows.js';

/** Below any report time: COALESCE's stand-in for "no such row". */
const NO_TS = -Number.MAX_SAFE_INTEGER;

/** A host's second-newest head row: no row under it can be one of the host's two newest. */
const SECOND_HEAD_TS = `COALESCE((SELECT r2.ts FROM reports r2 WHERE r2.host_key = h.key ORDER BY r2.ts DESC LIMIT 1 OFFSET 1), ${NO_TS})`;
/** A host's newest block of at least two rows: from it onwards, the blocks hold the host's two newest sealed rows. */
const LAST_FULL_WINDOW = `COALESCE((SELECT b2.window_start FROM blocks b2 WHERE b2.host_key = h.key AND b2.rows >= 2 ORDER BY b2.window_start DESC LIMIT 1), ${NO_TS})`;

/**
 * The tenant's hosts (or one of them), then per dialect the same two reads:
 * every host's two newest head rows, and the blocks that can hold one of its
 * two newest rows (from its last block of at least two rows on, reaching past
 * its second-newest head row), so a host reporting now decodes no block. Each
 * is an index seek per host. SQLite seeks with the correlated subqueries as
 * index bounds; PostgreSQL would run them as a filter on every joined row, so
 * it gets LATERAL joins (OFFSET 0 keeps the planner from flattening them back
 * into a hash join). The blocks read names them without their data: a quiet
 * host's block is already decoded at every poll but the first (TailRows).
 */
function reads(dialect: SqlConn['dialect'], oneHost: boolean): { hosts: string; head: string; blocks: string } {
  const which = `h.tenant_id = ?${oneHost ? ' AND h.host_id = ?' : ''}`;
  const hosts = `SELECT h.key, h.host_id, h.hostname, h.platform FROM hosts h WHERE ${which}`;
  if (dialect === 'sqlite') {
    return {
      hosts,
      head: `SELECT r.host_key, r.ts, r.samples FROM hosts h JOIN reports r ON r.host_key = h.key
        WHERE ${which} AND r.ts >= ${SECOND_HEAD_TS}`,
      blocks: `SELECT b.host_key, b.window_start, b.rows, b.max_ts FROM hosts h JOIN blocks b ON b.host_key = h.key
        WHERE ${which} AND b.window_start >= ${LAST_FULL_WINDOW} AND b.max_ts > ${SECOND_HEAD_TS}`,
    };
  }
  return {
    hosts,
    head: `SELECT h.key AS host_key, r.ts, r.samples FROM hosts h
      CROSS JOIN LATERAL (SELECT ts, samples FROM reports WHERE host_key = h.key ORDER BY ts DESC LIMIT 2) r
      WHERE ${which}`,
    blocks: `SELECT h.key AS host_key, b.window_start, b.rows, b.max_ts FROM hosts h
      CROSS JOIN LATERAL (SELECT ${SECOND_HEAD_TS} AS second_ts, ${LAST_FULL_WINDOW} AS from_window OFFSET 0) k
      CROSS JOIN LATERAL (SELECT window_start, rows, max_ts FROM blocks b WHERE b.host_key = h.key AND b.window_start >= k.from_window AND b.max_ts > k.second_ts OFFSET 0) b
      WHERE ${which}`,
  };
}

/** The data of the blocks not decoded yet, by (host, window): a statement per 250 blocks, none when all are. */
async function blockData(conn: SqlConn, refs: TailBlockRef[]): Promise<TailBlock[]> {
  const out: TailBlock[] = [];
  for (const chunk of chunks(refs, 250)) {
    out.push(...await conn.all<TailBlock>(
      `SELECT host_key, window_start, rows, max_ts, data FROM blocks WHERE ${chunk.map(() => '(host_key = ? AND window_start = ?)').join(' OR ')}`,
      chunk.flatMap((r) => [r.host_key, r.window_start])));
  }
  return out;
}

export interface LatestOptions {
  /** Names of metric ids (the tenant's dictionary). */
  nameOf: (ids: Iterable<number>) => Promise<Map<number, string>>;
  /** One host instead of all. */
  hostId?: string | undefined;
  /** Last blocks already decoded (the store keeps one across calls). */
  tails?: TailRows;
}

/**
 * Each host's latest report, read from where it lives (the head, or the last
 * blocks of a host that went quiet) rather than kept in a row every report
 * would update: the ingest path stays append-only. Three statements whatever
 * the number of hosts (plus one for the data of blocks not decoded yet, and
 * the name lookups of metric ids not yet cached; with `hostId`, that host's
 * row alone): the host list refreshes every 10 s, and a query per host was a
 * round trip per host on PostgreSQL.
 */
export async function latestByHost(conn: SqlConn, tenantId: string, opts: LatestOptions): Promise<HostLatest[]> {
  const { nameOf, hostId } = opts;
  const tails = opts.tails ?? new TailRows();
  const sql = reads(conn.dialect, hostId !== undefined);
  const params = hostId === undefined ? [tenantId] : [tenantId, hostId];
  const hosts = await conn.all<{ key: number; host_id: string; hostname: string; platform: string }>(sql.hosts, params);
  const newest = new Map<number, TailRow[]>(hosts.map((h) => [h.key, []]));
  const keep = (key: number, row: TailRow) => {
    const rows = newest.get(key);
    if (!rows) return;
    rows.push(row);
    rows.sort((a, b) => b.ts - a.ts);
    rows.length = Math.min(rows.length, 2);
  };
  for (const r of await conn.all<{ host_key: number; ts: number | string; samples: Uint8Array }>(sql.head, params)) {
    const { metricIds, values } = decodeSamples(r.samples);
    keep(r.host_key, { ts: Number(r.ts), values: new Map(Array.from(metricIds, (id, i) => [id, values[i]!])) });
  }
  const undecoded: TailBlockRef[] = [];
  for (const r of await conn.all<TailBlockRef>(sql.blocks, params)) {
    const rows = tails.cached(r);
    if (rows) for (const row of rows) keep(r.host_key, row);
    else undecoded.push(r);
  }
  for (const r of await blockData(conn, undecoded)) for (const row of tails.decode(r)) keep(r.host_key, row);
  const names = await nameOf(new Set([...newest.values()].flatMap((rows) => (rows[0] ? [...rows[0].values.keys()] : []))));
  const out: HostLatest[] = [];
  for (const h of hosts) {
    const [last, previous] = newest.get(h.key)!;
    if (!last) continue;
    let cpuUsage: number | null = null;
    let memoryPercent: number | null = null;
    let diskPercent: number | null = null;
    for (const [id, v] of last.values) {
      const name = names.get(id);
      if (name === 'cpu.usage') cpuUsage = v;
      else if (name === 'memory.percent') memoryPercent = v;
      else if (name?.startsWith('disk.') && name.endsWith('.percent') && (diskPercent === null || v > diskPercent)) diskPercent = v;
    }
    out.push({
      hostId: h.host_id, hostname: h.hostname, platform: h.platform, lastTs: last.ts,
      cpuUsage, memoryPercent, diskPercent, intervalMs: previous ? last.ts - previous.ts : null,
    });
  }
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return out.sort((a, b) => cmp(a.hostname, b.hostname) || cmp(a.hostId, b.hostId));
}
