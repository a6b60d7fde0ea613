import { AppError } from '../../../core/errors.js';
import { decodeSamples } from '../sample-codec.js';
import { divisorOf, visitBlock } from './block-codec.js';
import type { SeriesRequest, StoredSeries } from '../../domain/metrics-store.js';
import { Buckets } from './buckets.js';
import type { FoldPool } from './fold-pool.js';
import { planGrid, type Grid } from './query-plan.js';
import type { SqlConn, SqlReader } from './sql-conn.js';
import { AGGREGATE_UNIT_MS, HOST_TIER_MS, TENANT_COARSE_MS, TENANT_FINE_MS, WINDOW_MS, windowOf } from './windows.js';

/**
 * The read side: a host's series and a tenant's aggregate, from the head,
 * the blocks and the tiers, planned by query-plan.ts. Reads return raw
 * buffers and decode them column by column into typed arrays; no row ever
 * becomes a JavaScript object per sample.
 */
/**
 * Runs a read of the tenant's data so that it never straddles a
 * seal: a seal moves a window's rows from the head into a block and bumps the
 * tenant window's version in one transaction, but a read is several
 * statements, and one that read the block before the move and the head after
 * it would miss those rows. The versions are read before and after; if a seal
 * landed in between, the read is done again.
 */
export async function stableRead<T>(conn: SqlReader, tenantId: string, from: number, to: number, read: () => Promise<T>): Promise<T> {
  // An aligned bucket grid reaches back at most one bucket (no wider than the range) before `from`.
  const lo = windowOf(Math.max(0, from - (to - from + 1))) - WINDOW_MS;
  const versions = async () => {
    const [r] = await conn.all<{ v: number | string | null; n: number | string }>(
      'SELECT SUM(version) AS v, COUNT(*) AS n FROM tenant_windows WHERE tenant_id = ? AND window_start >= ? AND window_start <= ?', [tenantId, lo, to]);
    return `${r?.v ?? 0}/${r?.n ?? 0}`;
  };
  for (let attempt = 1; ; attempt++) {
    const before = await versions();
    const out = await read();
    if ((await versions()) === before || attempt >= STABLE_READ_ATTEMPTS) return out;
    // Seals come in runs (a pass seals window after window): wait for the run to pass rather than race it.
    await new Promise((resolve) => setTimeout(resolve, Math.min(100, 5 * attempt)));
  }
}

/** Compressed block bytes an aggregate gathers before folding them (spread over the fold threads). */
const FOLD_BATCH_BYTES = 1 << 20;

/** Tries before a read is served although seals of its windows kept landing (about 10 s of back-off). */
const STABLE_READ_ATTEMPTS = 40;

/** Bucket values one answer may accumulate (metrics x buckets); bounds a request's memory whatever the tenant holds. */
export const MAX_ANSWER_CELLS = 2_000_000;

interface BlockMeta {
  window_start: number;
  rows: number;
  min_ts: number;
  max_ts: number;
}

export async function readHost(conn: SqlConn, hostKey: number, q: SeriesRequest, pool?: FoldPool): Promise<StoredSeries> {
  void pool?.warm();
  const metas = (await conn.all<BlockMeta>(
    'SELECT window_start, rows, min_ts, max_ts FROM blocks WHERE host_key = ? AND window_start >= ? AND window_start <= ? ORDER BY window_start',
    [hostKey, windowOf(q.from), q.to])).filter((b) => b.max_ts >= q.from && b.min_ts <= q.to);
  const [head] = await conn.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM reports WHERE host_key = ? AND ts >= ? AND ts <= ?', [hostKey, q.from, q.to]);
  const headRows = Number(head?.n ?? 0);
  if (await countInRange(conn, hostKey, metas, q) + headRows <= q.points) return readRaw(conn, hostKey, metas, q);

  const grid = planGrid(q.from, q.to, q.points, { unit: 1, tiers: [HOST_TIER_MS] });
  const buckets = new Buckets(grid);
  // A window's rollup is one cell of the whole window: a window the range only partly covers is read from its samples.
  const [wholeFrom, wholeTo] = wholeWindows(q);
  const rows = await conn.all<{ window_start: number; blob: Uint8Array }>(
    grid.tier
      ? 'SELECT window_start, CASE WHEN window_start >= ? AND window_start <= ? THEN rollup ELSE data END AS blob FROM blocks WHERE host_key = ? AND window_start >= ? AND window_start <= ? ORDER BY window_start'
      : 'SELECT window_start, data AS blob FROM blocks WHERE host_key = ? AND window_start >= ? AND window_start <= ? ORDER BY window_start',
    [...(grid.tier ? [wholeFrom, wholeTo] : []), hostKey, windowOf(q.from), q.to]);
  if (grid.tier) {
    for (const r of rows) {
      const ws = Number(r.window_start);
      if (ws >= wholeFrom && ws <= wholeTo) buckets.addRollup(r.blob);
      else buckets.addBlock(r.blob);
    }
  } else if (pool) await pool.fold(buckets, rows.map((r) => r.blob), rows.map((r) => Number(r.window_start)));
  else for (const r of rows) buckets.addBlock(r.blob);
  await addHeadRows(conn, buckets, 'SELECT ts, samples FROM reports WHERE host_key = ? AND ts >= ? AND ts <= ?', [hostKey, q.from, q.to]);
  return { bucketMs: grid.width, ...buckets.columns(q.minmax) };
}

/**
 * How many stored reports of the tenant's host are newer than `ts` (0 for no such host), read so that a seal
 * landing meanwhile is neither missed nor counted twice (stableRead).
 */
export async function countHostReportsAfter(conn: SqlReader, tenantId: string, hostId: string, ts: number): Promise<number> {
  const [host] = await conn.all<{ key: number }>('SELECT key FROM hosts WHERE tenant_id = ? AND host_id = ?', [tenantId, hostId]);
  return host ? stableRead(conn, tenantId, ts, Number.MAX_SAFE_INTEGER, () => countAfter(conn, Number(host.key), ts)) : 0;
}

/** The host's reports newer than `ts`, in the head and the blocks (whole blocks by their row count). */
async function countAfter(conn: SqlReader, hostKey: number, ts: number): Promise<number> {
  const [head] = await conn.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM reports WHERE host_key = ? AND ts > ?', [hostKey, ts]);
  // A block of an earlier window ends before the window of `ts` begins.
  const metas = await conn.all<BlockMeta>('SELECT window_start, rows, min_ts, max_ts FROM blocks WHERE host_key = ? AND window_start >= ? AND max_ts > ?',
    [hostKey, windowOf(ts), ts]);
  return Number(head?.n ?? 0) + await countInRange(conn, hostKey, metas, { from: ts + 1, to: Number.MAX_SAFE_INTEGER, points: Number.POSITIVE_INFINITY });
}

/** The starts of the windows the range covers whole, first and last: their rollup cells may be used uncut. */
function wholeWindows(q: Pick<SeriesRequest, 'from' | 'to'>): [number, number] {
  return [q.from, q.to + 1 - WINDOW_MS];
}

/**
 * Reports in [from, to], or some number past `points` once that is certain: whole blocks count by their row count,
 * and only if they leave the answer open are the edge blocks read for their timestamps (through this thread's inflated
 * blocks, where the fold that follows finds them again).
 */
async function countInRange(conn: SqlReader, hostKey: number, metas: BlockMeta[], q: Pick<SeriesRequest, 'from' | 'to' | 'points'>): Promise<number> {
  let n = 0;
  const edges: BlockMeta[] = [];
  for (const m of metas) {
    if (m.min_ts >= q.from && m.max_ts <= q.to) n += m.rows;
    else edges.push(m);
  }
  for (const m of edges) {
    if (n > q.points) return n;
    const [row] = await conn.all<{ data: Uint8Array }>('SELECT data FROM blocks WHERE host_key = ? AND window_start = ?', [hostKey, m.window_start]);
    if (row) visitBlock(row.data, (ts) => { for (const t of ts) if (t >= q.from && t <= q.to) n++; }, () => undefined);
  }
  return n;
}

/**
 * Every report in [from, to], one point each. Blocks are decoded column by
 * column into a scratch area (visitBlock) and copied straight into the
 * answer's columns, which hold plain doubles (NaN where a report lacked the
 * metric, turned into null only in a column that has such a gap): a whole day
 * of a host is 8,640 reports x 28 metrics, and boxed numbers would double its
 * memory. Rows are put in time order through an index only when a late head
 * row falls before sealed ones.
 */
async function readRaw(conn: SqlConn, hostKey: number, metas: BlockMeta[], q: SeriesRequest): Promise<StoredSeries> {
  const ts: number[] = [];
  const columns = new Map<number, number[]>();
  /** A column of the answer, padded with NaN up to `rows`. */
  const column = (id: number, rows: number) => {
    let col = columns.get(id);
    if (!col) columns.set(id, (col = []));
    while (col.length < rows) col.push(Number.NaN);
    return col;
  };
  // The blocks in one statement, not one per window (a day is 24); only the windows found overlapping the range.
  const wanted = new Set(metas.map((m) => Number(m.window_start)));
  const blocks = metas.length ? await conn.all<{ window_start: number; data: Uint8Array }>(
    'SELECT window_start, data FROM blocks WHERE host_key = ? AND window_start >= ? AND window_start <= ? ORDER BY window_start',
    [hostKey, Number(metas[0]!.window_start), Number(metas[metas.length - 1]!.window_start)]) : [];
  for (const row of blocks) {
    if (!wanted.has(Number(row.window_start))) continue;
    let first = 0;
    let end = 0;
    const base = ts.length;
    visitBlock(row.data, (blockTs) => {
      while (first < blockTs.length && blockTs[first]! < q.from) first++;
      end = first;
      while (end < blockTs.length && blockTs[end]! <= q.to) end++;
      for (let i = first; i < end; i++) ts.push(blockTs[i]!);
    }, (id, values, exponent, rows) => {
      const divisor = divisorOf(exponent);
      if (!rows) {
        if (first === end) return;
        const col = column(id, base);
        for (let i = first; i < end; i++) col.push(values[i]! / divisor);
        return;
      }
      // A metric on some rows only: its values are for rows[k], in order.
      let k = 0;
      while (k < rows.length && rows[k]! < first) k++;
      if (k === rows.length || rows[k]! >= end) return;
      const col = column(id, base);
      for (; k < rows.length && rows[k]! < end; k++) {
        while (col.length < base + rows[k]! - first) col.push(Number.NaN);
        col.push(values[k]! / divisor);
      }
    });
  }
  const head = await conn.all<{ ts: number; samples: Uint8Array }>('SELECT ts, samples FROM reports WHERE host_key = ? AND ts >= ? AND ts <= ? ORDER BY ts', [hostKey, q.from, q.to]);
  for (const h of head) {
    const r = ts.length;
    ts.push(Number(h.ts));
    const { metricIds, values } = decodeSamples(h.samples);
    for (let i = 0; i < metricIds.length; i++) column(metricIds[i]!, r).push(values[i]!);
  }
  // A late head row before sealed rows: every column is put in time order through one index.
  const order = ts.some((t, i) => i > 0 && t < ts[i - 1]!) ? Array.from(ts.keys()).sort((a, b) => ts[a]! - ts[b]!) : undefined;
  const metrics = new Map<number, (number | null)[]>();
  for (const [id, col] of columns) {
    while (col.length < ts.length) col.push(Number.NaN);
    const sorted = order ? order.map((i) => col[i]!) : col;
    metrics.set(id, sorted.includes(Number.NaN) ? sorted.map((v) => (v === v ? v : null)) : sorted);
  }
  const timestamps = order ? order.map((i) => ts[i]!) : ts;
  // A raw point is its own smallest and largest value.
  return { bucketMs: null, timestamps, metrics, ...(q.minmax ? { min: metrics, max: metrics } : {}) };
}

/**
 * The tenant's average: per bucket and metric, the mean of every sample of
 * every host in the bucket (hosts at one reporting interval weigh the same).
 * Windows whose tenant rollup is current are read from it; the others (not yet
 * rolled up, or changed by a late seal) from their hosts' blocks; the head
 * from raw rows.
 */
export async function readAggregate(conn: SqlConn, tenantId: string, q: SeriesRequest, pool?: FoldPool): Promise<StoredSeries & { hosts: number }> {
  void pool?.warm();
  const grid = planGrid(q.from, q.to, q.points, { unit: AGGREGATE_UNIT_MS, tiers: [TENANT_FINE_MS, TENANT_COARSE_MS] });
  await assertAnswerFits(conn, tenantId, grid);
  const buckets = new Buckets(grid);
  // Only windows the range overlaps; of those, rollups only of the windows it covers whole (a cell cannot be cut at
  // the range's edge): the edge windows are folded from their hosts' blocks, clipped to the range.
  const first = windowOf(q.from);
  const end = q.to + 1;
  const fresh = new Set<number>();
  if (grid.tier) {
    const column = grid.tier === TENANT_COARSE_MS ? 'coarse' : 'fine';
    const rolled = await conn.all<{ window_start: number; blob: Uint8Array }>(
      `SELECT window_start, ${column} AS blob FROM tenant_windows
       WHERE tenant_id = ? AND window_start >= ? AND window_start <= ? AND rolled_version = version`, [tenantId, ...wholeWindows(q)]);
    for (const r of rolled) {
      buckets.addRollup(r.blob);
      fresh.add(Number(r.window_start));
    }
  }
  const windows = await conn.all<{ window_start: number }>(
    `SELECT DISTINCT b.window_start FROM blocks b JOIN hosts h ON h.key = b.host_key
     WHERE h.tenant_id = ? AND b.window_start >= ? AND b.window_start < ? ORDER BY b.window_start`, [tenantId, first, end]);
  // Windows read a few at a time: memory holds about FOLD_BATCH_BYTES of blocks, however long the range.
  let batch: Uint8Array[] = [];
  let starts: number[] = [];
  /** Per block of the batch, its host when its span only overlaps the range (it may hold no report inside it). */
  let edgeHosts: Array<number | undefined> = [];
  let bytes = 0;
  /** Per window, the hosts whose block there spans into the range without a report inside it: not counted in `hosts`. */
  const emptyEdges = new Map<number, number[]>();
  const foldBatch = async () => {
    const inRange = pool ? await pool.fold(buckets, batch, starts) : batch.map((b) => buckets.addBlock(b));
    edgeHosts.forEach((hostKey, i) => {
      if (hostKey === undefined || inRange[i]) return;
      const list = emptyEdges.get(starts[i]!);
      if (list) list.push(hostKey);
      else emptyEdges.set(starts[i]!, [hostKey]);
    });
    batch = [];
    starts = [];
    edgeHosts = [];
    bytes = 0;
  };
  for (const { window_start } of windows) {
    if (fresh.has(Number(window_start))) continue;
    const blocks = await conn.all<{ host_key: number; min_ts: number; max_ts: number; data: Uint8Array }>(
      'SELECT b.host_key, b.min_ts, b.max_ts, b.data FROM blocks b JOIN hosts h ON h.key = b.host_key WHERE h.tenant_id = ? AND b.window_start = ?', [tenantId, window_start]);
    for (const b of blocks) {
      batch.push(b.data);
      starts.push(Number(window_start));
      edgeHosts.push(Number(b.min_ts) < q.from || Number(b.max_ts) > q.to ? Number(b.host_key) : undefined);
      bytes += b.data.byteLength;
    }
    if (bytes >= FOLD_BATCH_BYTES) await foldBatch();
  }
  if (batch.length) await foldBatch();
  await addHeadRows(conn, buckets,
    'SELECT r.ts, r.samples FROM reports r JOIN hosts h ON h.key = r.host_key WHERE h.tenant_id = ? AND r.ts >= ? AND r.ts <= ?', [tenantId, q.from, q.to]);
  return { bucketMs: grid.width, hosts: await countHosts(conn, tenantId, q, emptyEdges), ...buckets.columns(q.minmax) };
}

/**
 * Hosts with a report in [from, to]: a head row, or a block whose span overlaps the range, but not the blocks the fold
 * found without a report inside it (`emptyEdges`, per window: only a range's two edge windows can have such blocks,
 * and only a host with a gap around the edge, so the list is nearly always empty).
 */
async function countHosts(conn: SqlConn, tenantId: string, q: SeriesRequest, emptyEdges: Map<number, number[]>): Promise<number> {
  const inKeys = conn.dialect === 'postgres' ? 'b.host_key = ANY(?::int[])' : 'b.host_key IN (SELECT value FROM json_each(?))';
  const skip = [...emptyEdges.keys()].map(() => ` AND NOT (b.window_start = ? AND ${inKeys})`).join('');
  const skipped = [...emptyEdges].flatMap(([windowStart, keys]) => [windowStart, conn.dialect === 'postgres' ? keys : JSON.stringify(keys)]);
  const [counted] = await conn.all<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM hosts h WHERE h.tenant_id = ? AND (
       EXISTS (SELECT 1 FROM blocks b WHERE b.host_key = h.key AND b.window_start >= ? AND b.window_start < ? AND b.max_ts >= ? AND b.min_ts <= ?${skip})
       OR EXISTS (SELECT 1 FROM reports r WHERE r.host_key = h.key AND r.ts >= ? AND r.ts <= ?))`,
    [tenantId, windowOf(q.from), q.to + 1, q.from, q.to, ...skipped, q.from, q.to]);
  return Number(counted?.n ?? 0);
}

async function tenantNameCount(conn: SqlConn, tenantId: string): Promise<number> {
  const [r] = await conn.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM metric_names WHERE tenant_id = ?', [tenantId]);
  return Number(r?.n ?? 0);
}

/** The most buckets an aggregate of every metric of the tenant may hold (the bound assertAnswerFits applies). */
export async function aggregatePointsLimit(conn: SqlConn, tenantId: string): Promise<number> {
  return Math.max(1, Math.floor(MAX_ANSWER_CELLS / Math.max(1, await tenantNameCount(conn, tenantId))));
}

async function assertAnswerFits(conn: SqlConn, tenantId: string, grid: Grid): Promise<void> {
  const names = await tenantNameCount(conn, tenantId);
  if (names * grid.count > MAX_ANSWER_CELLS) {
    throw new AppError('limit_exceeded', `the answer would hold ${names} metrics x ${grid.count} points; at most ${MAX_ANSWER_CELLS} values are served: ask for at most ${Math.max(1, Math.floor(MAX_ANSWER_CELLS / names))} points`);
  }
}

async function addHeadRows(conn: SqlConn, buckets: Buckets, text: string, params: unknown[]): Promise<void> {
  for (const h of await conn.all<{ ts: number; samples: Uint8Array }>(text, params)) {
    const { metricIds, values } = decodeSamples(h.samples);
    buckets.addRow(Number(h.ts), metricIds, values);
  }
}
