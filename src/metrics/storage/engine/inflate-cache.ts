import { brotliDecompressSync } from 'node:zlib';

/**
 * Sealed blocks and rollups inflated recently, kept inflated (as Netdata's
 * dbengine keeps a cache of uncompressed pages): Brotli inflation was a fifth
 * of a query's CPU, and a dashboard redraws the same hours every few seconds.
 *
 * An entry is found by the compressed bytes themselves and checked against
 * them in full, so a block sealed again (late reports merged in) can never be
 * answered with its old contents, and nothing needs invalidating.
 *
 * Entries live in one ring of `budgetBytes`, allocated once, written in turn
 * and dropped oldest first where the next entry needs the room. Thousands of
 * 12 KB buffers kept among a query's short-lived ones would scatter through
 * malloc's arenas and keep them from shrinking: a cache of 4 MiB per thread so
 * kept grew the service by 40 MiB. Each thread that decodes blocks (the event
 * loop, every fold thread) has its own.
 */
export class InflateCache {
  private ring: Uint8Array | undefined;
  private readonly entries = new Map<string, Entry[]>();
  /** Entries in the order written, which is their order in the ring from `next` on. */
  private readonly queue: Entry[] = [];
  private queueHead = 0;
  private next = 0;
  hits = 0;
  misses = 0;

  constructor(private readonly budgetBytes: number, private readonly inflater: (packed: Uint8Array) => Uint8Array = brotliDecompressSync) {}

  /**
   * The inflated bytes of `packed`. A view into the ring, valid until the next call: a block is decoded before the
   * next one is inflated.
   */
  inflate(packed: Uint8Array): Uint8Array {
    const key = keyOf(packed);
    const list = this.entries.get(key);
    if (list && this.ring) {
      for (const e of list) {
        if (e.packed !== packed.byteLength || !equal(this.ring.subarray(e.start, e.start + e.packed), packed)) continue;
        this.hits++;
        return this.ring.subarray(e.start + e.packed, e.start + e.packed + e.inflated);
      }
    }
    this.misses++;
    const inflated = this.inflater(packed);
    const size = packed.byteLength + inflated.byteLength;
    if (size > this.budgetBytes) return inflated;
    const start = this.claim(size);
    const ring = (this.ring ??= new Uint8Array(this.budgetBytes));
    ring.set(packed, start);
    ring.set(inflated, start + packed.byteLength);
    const entry: Entry = { key, start, packed: packed.byteLength, inflated: inflated.byteLength };
    this.queue.push(entry);
    // Looked up again: making room may have dropped the key's other entries, and its list with them.
    const same = this.entries.get(key);
    if (same) same.push(entry);
    else this.entries.set(key, [entry]);
    return inflated;
  }

  /** Room for `size` bytes at the write position (at the ring's start when the end has too little): the entries there go. */
  private claim(size: number): number {
    let start = this.next;
    if (start + size > this.budgetBytes) {
      // The entries between here and the end are the oldest: they go with the wrap.
      this.dropWhile((e) => e.start >= start);
      start = 0;
    }
    this.dropWhile((e) => e.start < start + size && e.start + e.packed + e.inflated > start);
    this.next = start + size;
    return start;
  }

  private dropWhile(overlaps: (e: Entry) => boolean): void {
    while (this.queueHead < this.queue.length && overlaps(this.queue[this.queueHead]!)) {
      const e = this.queue[this.queueHead++]!;
      const list = this.entries.get(e.key)!;
      if (list.length === 1) this.entries.delete(e.key);
      else list.splice(list.indexOf(e), 1);
    }
    // The queue's dropped front is cut off now and then, not on every drop.
    if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
  }

  /** Blocks held. */
  get size(): number {
    return this.queue.length - this.queueHead;
  }

  /** Bytes the blocks held take in the ring (compressed and inflated): never more than the budget. */
  get bytes(): number {
    let n = 0;
    for (let i = this.queueHead; i < this.queue.length; i++) n += this.queue[i]!.packed + this.queue[i]!.inflated;
    return n;
  }
}

interface Entry {
  key: string;
  start: number;
  packed: number;
  inflated: number;
}

/** Length and the last bytes (a Brotli stream's end differs between blocks): a cheap key, checked in full on a hit. */
function keyOf(b: Uint8Array): string {
  let k = `${b.byteLength}`;
  for (let i = Math.max(0, b.byteLength - 12); i < b.byteLength; i++) k += `,${b[i]}`;
  return k;
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}
