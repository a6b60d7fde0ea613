// The newest rows of hosts' last blocks, decoded once per block: a quiet host's last block is the same at every poll.
import { decodeBlock } from './block-codec.js';

export interface TailRow {
  ts: number;
  values: Map<number, number>;
}

/** Which block, and which version of it: what latestByHost reads before it needs a block's data. */
export interface TailBlockRef {
  host_key: number;
  window_start: number | string;
  rows: number;
  max_ts: number | string;
}

/** A block row with its data. */
export interface TailBlock extends TailBlockRef {
  data: Uint8Array;
}

/**
 * Decoded tail rows by block. A block is immutable; a re-seal (late reports
 * merged in) replaces it with more rows, so (host, window, rows, max_ts) tells
 * a block from its successor. Bounded: past `maxBlocks` the oldest entry goes.
 */
export class TailRows {
  private readonly byBlock = new Map<string, { version: string; rows: TailRow[] }>();
  /** Blocks decoded so far (what the cache saves is visible to tests). */
  decoded = 0;

  constructor(private readonly maxBlocks = 20_000) {}

  /** The block's two newest rows, newest first, when this version of it was decoded before. */
  cached(block: TailBlockRef): TailRow[] | undefined {
    const hit = this.byBlock.get(keyOf(block));
    return hit?.version === versionOf(block) ? hit.rows : undefined;
  }

  /**
   * The block's two newest rows, newest first, decoded now and kept. The
   * second carries its time only: it can be a host's second-newest row at
   * best, whose values nobody reads, and the cache holds half the values.
   */
  decode(block: TailBlock): TailRow[] {
    this.decoded++;
    const b = decodeBlock(block.data);
    const last = b.ts.length - 1;
    const values = new Map<number, number>();
    for (const [id, col] of b.columns) if (col[last] === col[last]) values.set(id, col[last]!);
    const rows: TailRow[] = [{ ts: b.ts[last]!, values }];
    if (last > 0) rows.push({ ts: b.ts[last - 1]!, values: new Map() });
    const key = keyOf(block);
    this.byBlock.delete(key);
    if (this.byBlock.size >= this.maxBlocks) this.byBlock.delete(this.byBlock.keys().next().value!);
    this.byBlock.set(key, { version: versionOf(block), rows });
    return rows;
  }
}

const keyOf = (b: TailBlockRef) => `${b.host_key}:${b.window_start}`;
const versionOf = (b: TailBlockRef) => `${b.rows}:${b.max_ts}`;
