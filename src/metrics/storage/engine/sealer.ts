import { decodeSamples } from '../sample-codec.js';
import { decodeBlock, encodeBlock, encodeBlockAsync, type BlockData } from './block-codec.js';
import type { HeadWindows } from './head-windows.js';
import { encodeRollup, encodeRollupAsync, rollUp } from './rollup.js';
import type { SqlConn } from './sql-conn.js';
import { HOST_TIER_MS, WINDOW_MS } from './windows.js';

/**
 * Sealing: a host's head rows of a closed window move into one compressed,
 * immutable block (merged with the window's earlier block when late reports
 * arrived), in one transaction that also deletes exactly the head rows it
 * read, so a report is always in the head or in a block, never both, never
 * neither. On PostgreSQL an instance seals a host only while it holds that
 * host's row lock (SKIP LOCKED): two instances never seal the same host at
 * once, and the lock does not block ingest of the open window (inserts take a weaker lock). An append of a report
 * of an ended window holds its host in a mode that conflicts with it (head-writer.ts, lockHostsOfEndedWindows): it
 * waits for a seal under way, so that it sees the block and answers a re-sent report as a duplicate, and a seal that
 * finds the host held skips it until a later pass.
 * The commit does not wait for the disk: it moves reports that are already
 * durable, and a crash can only undo it whole (they are then in the head).
 */
export interface SealSettings {
  /** How long after a window's end late reports are still waited for before it is sealed. */
  graceMs: number;
  /**
   * A window still receiving reports (a backlog being replayed) is left alone
   * until it has been quiet this long, and at least four of its host's usual
   * gaps between reports: sealing it sooner would only seal it again.
   */
  idleMs: number;
}

export interface SealCandidate {
  hostKey: number;
  windowStart: number;
}

/**
 * Head windows ready to seal, of those the writer knows (head-windows.ts):
 * closed (end + grace <= now) and not being filled (the host has moved on to
 * a later window, or this instance has not appended to it for a while, see
 * SealSettings.idleMs). `force` ignores the idle rule. Ordered by host, then
 * window; each with the generation a seal must still see to forget it.
 */
export function findSealable(windows: HeadWindows, s: SealSettings, now: number, wallNow: number, pace: { lastAppend: Map<number, number>; appendGap: Map<number, number> }, force: boolean): Array<SealCandidate & { generation: number }> {
  const out: Array<SealCandidate & { generation: number }> = [];
  for (const [hostKey, hostWindows] of windows.hosts()) {
    const newest = Math.max(...hostWindows.keys());
    const quietSince = pace.lastAppend.get(hostKey);
    const quiet = quietSince === undefined || wallNow - quietSince >= Math.max(s.idleMs, 4 * (pace.appendGap.get(hostKey) ?? 0));
    for (const [windowStart, generation] of hostWindows) {
      if (windowStart + WINDOW_MS + s.graceMs > now) continue;
      if (force || windowStart < newest || quiet) out.push({ hostKey, windowStart, generation });
    }
  }
  return out.sort((a, b) => a.hostKey - b.hostKey || a.windowStart - b.windowStart);
}

type HeadRow = { ts: number; samples: Uint8Array };

/**
 * A seal's block and its window's rollup, built and compressed before its
 * transaction (compression is most of a seal's time, and runs in the thread
 * pool meanwhile, so appends commit in between and the transaction, which
 * appends wait behind, only writes). The transaction uses it only if it finds exactly the
 * head rows and the old block this was built from; otherwise it builds the
 * block again from what it finds.
 */
export interface PreparedSeal {
  head: HeadRow[];
  old: Uint8Array | undefined;
  merged: BlockData;
  data: Uint8Array;
  /** The window's host-tier rollup, encoded. */
  rollup: Uint8Array;
}

export async function prepareSeal(conn: SqlConn, c: SealCandidate): Promise<PreparedSeal | undefined> {
  const head = await readHead(conn, c);
  if (!head.length) return undefined;
  const old = await readBlockData(conn, c);
  const merged = mergeRows(old ? decodeBlock(old) : undefined, head);
  const [data, rollup] = await Promise.all([encodeBlockAsync(merged), encodeRollupAsync(rollUp(merged, HOST_TIER_MS))]);
  return { head, old, merged, data, rollup };
}

/** What prepareSeal encodes, on this thread: for a transaction that found the head or the old block changed. */
function encodeNow(merged: BlockData): Pick<PreparedSeal, 'data' | 'rollup'> {
  return { data: encodeBlock(merged), rollup: encodeRollup(rollUp(merged, HOST_TIER_MS)) };
}

/** Seals one host window; false when there was nothing to do or another instance holds the host. */
export async function sealWindow(conn: SqlConn, c: SealCandidate, wallNow: number, prepared?: PreparedSeal): Promise<boolean> {
  return (await sealWindows(conn, [{ c, prepared }], wallNow))[0]!;
}

/**
 * Seals several host windows in one transaction; which of them were sealed. The head is a table in arrival order,
 * so the rows of hosts reporting at the same pace share pages: each window in a transaction of its own logged the
 * same pages again (eight at a time sealed 10-20 % more windows a second at the top of the hour, docs/benchmarks.md).
 * Their tenant windows are marked changed last, in key order, so that two instances' transactions on PostgreSQL
 * never wait on each other's rows in opposite orders. A retention sweep that deleted rows one of them had read
 * undoes the transaction; each is then sealed alone, so only that one is undone.
 */
export async function sealWindows(conn: SqlConn, items: ReadonlyArray<{ c: SealCandidate; prepared: PreparedSeal | undefined }>, wallNow: number): Promise<boolean[]> {
  const inOne = () => conn.transaction(async (tx) => {
    const tenants: Array<string | undefined> = [];
    for (const { c, prepared } of items) tenants.push(await sealIn(tx, c, prepared));
    // Any order every instance shares prevents the deadlock; the key's is one.
    const changed = new Map<string, [tenantId: string, windowStart: number]>();
    items.forEach(({ c }, i) => { const t = tenants[i]; if (t !== undefined) changed.set(`${t}\0${c.windowStart}`, [t, c.windowStart]); });
    for (const [, w] of [...changed].sort(([a], [b]) => (a < b ? -1 : 1))) {
      await tx.run(
        `INSERT INTO tenant_windows (tenant_id, window_start, version, changed_at) VALUES (?, ?, 1, ?)
         ON CONFLICT (tenant_id, window_start) DO UPDATE SET version = tenant_windows.version + 1, changed_at = excluded.changed_at`,
        [...w, wallNow]);
    }
    return tenants.map((t) => t !== undefined);
  }, { relaxed: true });
  try {
    return await inOne();
  } catch (e: unknown) {
    if (!(e instanceof HeadChanged)) throw e;
    if (items.length === 1) return [false];
    const done: boolean[] = [];
    for (const item of items) done.push(await sealWindow(conn, item.c, wallNow, item.prepared));
    return done;
  }
}

/** The head rows a seal read were deleted meanwhile (retention on another connection): the seal is undone whole. */
class HeadChanged extends Error {}

function readHead(conn: SqlConn, c: SealCandidate): Promise<HeadRow[]> {
  return conn.all<HeadRow>('SELECT ts, samples FROM reports WHERE host_key = ? AND ts >= ? AND ts < ? ORDER BY ts', [c.hostKey, c.windowStart, c.windowStart + WINDOW_MS]);
}

async function readBlockData(conn: SqlConn, c: SealCandidate): Promise<Uint8Array | undefined> {
  const [old] = await conn.all<{ data: Uint8Array }>('SELECT data FROM blocks WHERE host_key = ? AND window_start = ?', [c.hostKey, c.windowStart]);
  return old?.data;
}

/**
 * One window's block written and its head rows deleted inside `tx`; its tenant, or undefined when there was nothing to
 * do or another instance holds the host.
 */
async function sealIn(tx: SqlConn, c: SealCandidate, prepared: PreparedSeal | undefined): Promise<string | undefined> {
  const lock = tx.dialect === 'postgres' ? ' FOR NO KEY UPDATE SKIP LOCKED' : '';
  const [host] = await tx.all<{ tenant_id: string }>(`SELECT tenant_id FROM hosts WHERE key = ?${lock}`, [c.hostKey]);
  if (!host) return undefined;
  const head = await readHead(tx, c);
  if (!head.length) return undefined;
  const old = await readBlockData(tx, c);
  const reuse = prepared !== undefined && sameBytes(prepared.old, old) && sameRows(prepared.head, head);
  const merged = reuse ? prepared.merged : mergeRows(old ? decodeBlock(old) : undefined, head);
  const { data, rollup } = reuse ? prepared : encodeNow(merged);
  const ts = merged.ts;
  await tx.run(
    `INSERT INTO blocks (host_key, window_start, rows, min_ts, max_ts, rollup, data) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (host_key, window_start) DO UPDATE SET rows = excluded.rows, min_ts = excluded.min_ts, max_ts = excluded.max_ts,
     rollup = excluded.rollup, data = excluded.data`,
    [c.hostKey, c.windowStart, ts.length, ts[0]!, ts[ts.length - 1]!, asBuffer(rollup), asBuffer(data)]);
  if (tx.dialect === 'postgres') {
    // Exactly the rows read: another instance may have appended to this window since.
    // Fewer than read: a retention sweep deleted them after this read; writing the block would bring them back.
    const deleted = await tx.run('DELETE FROM reports WHERE host_key = ? AND ts = ANY(?::bigint[])', [c.hostKey, head.map((r) => r.ts)]);
    if (deleted !== head.length) throw new HeadChanged();
  } else {
    await tx.run('DELETE FROM reports WHERE host_key = ? AND ts >= ? AND ts <= ?', [c.hostKey, c.windowStart, head[head.length - 1]!.ts]);
  }
  return host.tenant_id;
}

function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  return a === undefined || b === undefined ? a === b : Buffer.compare(a, b) === 0;
}

function sameRows(a: HeadRow[], b: HeadRow[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (Number(a[i]!.ts) !== Number(b[i]!.ts) || !sameBytes(a[i]!.samples, b[i]!.samples)) return false;
  return true;
}

/**
 * A block's rows plus head rows, by ts; where both hold a ts the sealed one stays (it was answered first). Values go
 * straight from the block's columns and the packed head rows into the merged columns.
 */
export function mergeRows(block: BlockData | undefined, head: Array<{ ts: number; samples: Uint8Array }>): BlockData {
  const taken = new Set<number>(block?.ts);
  const fresh: Array<{ ts: number; samples: Uint8Array }> = [];
  for (const h of head) {
    const ts = Number(h.ts);
    if (taken.has(ts)) continue;
    taken.add(ts);
    fresh.push({ ts, samples: h.samples });
  }
  const ts = Float64Array.from(taken).sort();
  const n = ts.length;
  const at = new Map<number, number>();
  for (let i = 0; i < n; i++) at.set(ts[i]!, i);
  const columns = new Map<number, Float64Array>();
  const column = (id: number): Float64Array => {
    let col = columns.get(id);
    if (!col) columns.set(id, (col = new Float64Array(n).fill(Number.NaN)));
    return col;
  };
  if (block) {
    const rows = block.ts.map((t) => at.get(t)!);
    for (const [id, values] of block.columns) {
      const col = column(id);
      for (let i = 0; i < values.length; i++) if (!Number.isNaN(values[i]!)) col[rows[i]!] = values[i]!;
    }
  }
  for (const h of fresh) {
    const row = at.get(h.ts)!;
    const { metricIds, values } = decodeSamples(h.samples);
    for (let i = 0; i < metricIds.length; i++) column(metricIds[i]!)[row] = values[i]!;
  }
  return { ts, columns };
}

export function asBuffer(b: Uint8Array): Buffer {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}
