// The newest rows of hosts' last blocks, decoded once per block: a quiet host's last block is the same at every poll.
import { decodeBlock } from './block-codec.js';

export interface TailRow {
  ts: number;
  values: Map<number, number>;
}

/** A block row as latestByHost reads it. */
export interface TailBlock {
  window_start: number | string;
  rows: number;
  max_ts: number | string;
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

  /** The block's two newest rows, newest first. */
  newest(hostKey: number, block: TailBlock): TailRow[] {
    const key = `${hostKey}:${block.window_start}`;
    const version = `${block.rows}:${block.max_ts}`;
    const hit = this.byBlock.get(key);
    if (hit?.version === version) return hit.rows;
    this.decoded++;
    const b = decodeBlock(block.data);
    const rows: TailRow[] = [];
    for (let i = b.ts.length - 1; i >= Math.max(0, b.ts.length - 2); i--) {
      const values = new Map<number, number>();
      for (const [id, col] of b.columns) if (col[i] === col[i]) values.set(id, col[i]!);
      rows.push({ ts: b.ts[i]!, values });
    }
    this.byBlock.delete(key);
    if (this.byBlock.size >= this.maxBlocks) this.byBlock.delete(this.byBlock.keys().next().value!);
    this.byBlock.set(key, { version, rows });
    return rows;
  }
}
