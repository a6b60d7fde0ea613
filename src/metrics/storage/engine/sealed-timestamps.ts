import { decodeBlock } from './block-codec.js';
import type { SqlConn } from './sql-conn.js';
import { windowOf } from './windows.js';

/**
 * Whether a (host, ts) is already inside a sealed block, for the duplicate
 * check of a report that arrives after its window was sealed. Blocks are
 * looked up per batch by key; a block's timestamps are decoded only when the
 * ts falls inside its span, and kept in a small cache (a block is replaced,
 * never changed, so the cache key includes its row count and span).
 */
export interface SealedMeta {
  minTs: number;
  maxTs: number;
  rows: number;
}

export async function loadSealedMeta(conn: SqlConn, pairs: Array<[hostKey: number, windowStart: number]>): Promise<Map<string, SealedMeta>> {
  const out = new Map<string, SealedMeta>();
  const unique = [...new Map(pairs.map((p) => [`${p[0]}:${p[1]}`, p])).values()];
  if (!unique.length) return out;
  type Row = { host_key: number; window_start: number; min_ts: number; max_ts: number; rows: number };
  const rows = conn.dialect === 'postgres'
    ? await conn.all<Row>('SELECT host_key, window_start, min_ts, max_ts, rows FROM blocks WHERE (host_key, window_start) IN (SELECT * FROM unnest(?::int[], ?::bigint[]))',
      [unique.map((p) => p[0]), unique.map((p) => p[1])])
    : (await Promise.all(unique.map((p) => conn.all<Row>('SELECT host_key, window_start, min_ts, max_ts, rows FROM blocks WHERE host_key = ? AND window_start = ?', p)))).flat();
  for (const r of rows) out.set(`${r.host_key}:${r.window_start}`, { minTs: r.min_ts, maxTs: r.max_ts, rows: r.rows });
  return out;
}

const CACHE_BLOCKS = 64;

export class SealedTimestamps {
  private readonly cache = new Map<string, Set<number>>();

  /**
   * The host's sealed block of ts's window when ts falls inside its span: only such a ts can be a duplicate of a
   * sealed report (most reports are for the head, and answer here without an await).
   */
  spanning(meta: Map<string, SealedMeta>, hostKey: number, ts: number): SealedMeta | undefined {
    if (!meta.size) return undefined;
    const m = meta.get(`${hostKey}:${windowOf(ts)}`);
    return m && ts >= m.minTs && ts <= m.maxTs ? m : undefined;
  }

  /** Whether `ts` is a timestamp of `m`, the block `spanning` found for it. */
  async holds(conn: SqlConn, m: SealedMeta, hostKey: number, ts: number): Promise<boolean> {
    const windowStart = windowOf(ts);
    const key = `${hostKey}:${windowStart}:${m.rows}:${m.minTs}:${m.maxTs}`;
    let set = this.cache.get(key);
    if (!set) {
      const [row] = await conn.all<{ data: Uint8Array }>('SELECT data FROM blocks WHERE host_key = ? AND window_start = ?', [hostKey, windowStart]);
      set = new Set(row ? decodeBlock(row.data).ts : []);
      if (this.cache.size >= CACHE_BLOCKS) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(key, set);
    }
    return set.has(ts);
  }
}
