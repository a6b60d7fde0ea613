import { createHash } from 'node:crypto';
import { brotliDecompressSync } from 'node:zlib';

/**
 * Sealed blocks kept decompressed for the queries that read them again: a
 * dashboard redraws the same hours every few seconds, as Netdata's dbengine
 * keeps decompressed pages and ClickHouse its uncompressed cache. Brotli was
 * about 100 µs of a block's read (31 µs of it setting up the decoder); a
 * SHA-256 of the compressed bytes is 6 µs. Entries are keyed by that digest,
 * not by host and window, so an entry never stands for other bytes (a window
 * sealed again with a late report, a key reused after a host is deleted,
 * another instance's write) and nothing has to invalidate it. Past the budget
 * the least recently used entries go first. Each thread that reads for queries
 * keeps its own; the writer's seals and rollups decompress uncached.
 */
export type Inflate = (packed: Uint8Array) => Uint8Array;

/** Decompresses a block's bytes (the block codec's compression), uncached. */
export const inflateBlock: Inflate = (packed) => brotliDecompressSync(packed);

/** Decompressed bytes each query thread keeps: a tenant of 20 hosts is about 1.5 MiB for 6 hours. */
export const INFLATED_BLOCKS_BYTES = 4 * 1024 * 1024;

export interface InflatedBlocks {
  inflate: Inflate;
  /** Decompressed bytes held now (at most the budget). */
  readonly bytes: number;
  readonly hits: number;
}

export function createInflatedBlocks(budgetBytes = INFLATED_BLOCKS_BYTES): InflatedBlocks {
  // Insertion order is recency: a hit is moved to the end, eviction takes from the front.
  const entries = new Map<string, Uint8Array>();
  let bytes = 0;
  let hits = 0;
  return {
    get bytes() { return bytes; },
    get hits() { return hits; },
    inflate(packed) {
      const key = createHash('sha256').update(packed).digest('base64');
      const held = entries.get(key);
      if (held) {
        hits++;
        entries.delete(key);
        entries.set(key, held);
        return held;
      }
      // The decoder's buffer is a view into a larger allocation: keep an exact-size copy.
      const raw = new Uint8Array(inflateBlock(packed));
      if (raw.byteLength > budgetBytes) return raw;
      entries.set(key, raw);
      bytes += raw.byteLength;
      for (const [k, v] of entries) {
        if (bytes <= budgetBytes) break;
        entries.delete(k);
        bytes -= v.byteLength;
      }
      return raw;
    },
  };
}
