import { mkdir, open, readdir, readFile, rename, unlink, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../logger.js';

/** One spooled report: a file `r-<seq>-<ts>.json` holding the exact body to send. */
export interface SpoolEntry {
  seq: number;
  /** The report's own timestamp (epoch ms), used for the age bound. */
  ts: number;
  bytes: number;
  file: string;
}

export interface SpoolOptions {
  dir: string;
  /** Total bytes of spooled reports kept; past it the oldest are dropped. */
  maxBytes: number;
  /** Reports older than this (by their `ts`) are dropped. */
  maxAgeMs: number;
  log: Logger;
  now?: () => number;
}

/** Counters kept across restarts in `counters.json`, so a loss is visible even after the log rotated. */
export interface SpoolCounters {
  /** Reports dropped unsent because the spool hit its size or age bound. */
  dropped: number;
  /** Reports the service refused with a non-retryable 4xx. */
  rejected: number;
}

const NAME = /^r-(\d{16})-(\d+)\.json$/;
const COUNTERS = 'counters.json';

async function writeDurably(file: string, data: Buffer | string): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}

async function unlinkIfPresent(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (e: unknown) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try { await fh.sync(); } finally { await fh.close(); }
}

/**
 * The agent's write-ahead queue on disk. Every collected report is appended
 * (written, fsynced, renamed into place, directory fsynced) before anything
 * tries to send it, and removed only once the service answered. So a report
 * survives the service being down, the agent crashing, and the host rebooting;
 * the delivery loop sends strictly in `seq` order. Bounded by total size and by
 * age: the oldest reports go first, counted in `counters.json` and logged.
 */
export class Spool {
  private entries: SpoolEntry[] = [];
  private totalBytes = 0;
  private nextSeq = 1;
  private readonly now: () => number;
  private constructor(private readonly opts: SpoolOptions, readonly counters: SpoolCounters) {
    this.now = opts.now ?? Date.now;
  }

  /** Opens (creating) the spool directory and indexes what a previous run left; half-written files are removed. */
  static async open(opts: SpoolOptions): Promise<Spool> {
    await mkdir(opts.dir, { recursive: true, mode: 0o700 });
    let counters: SpoolCounters = { dropped: 0, rejected: 0 };
    try {
      const raw = JSON.parse(await readFile(path.join(opts.dir, COUNTERS), 'utf8')) as Partial<SpoolCounters>;
      counters = { dropped: Number(raw.dropped) || 0, rejected: Number(raw.rejected) || 0 };
    } catch (e: unknown) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') opts.log.warn('spool counters unreadable, starting from zero', { error: String(e) });
    }
    const spool = new Spool(opts, counters);
    for (const name of await readdir(opts.dir)) {
      if (name.endsWith('.tmp')) { await unlink(path.join(opts.dir, name)); continue; }
      const m = NAME.exec(name);
      if (!m) continue;
      const file = path.join(opts.dir, name);
      spool.entries.push({ seq: Number(m[1]), ts: Number(m[2]), bytes: (await stat(file)).size, file });
    }
    spool.entries.sort((a, b) => a.seq - b.seq);
    spool.totalBytes = spool.entries.reduce((s, e) => s + e.bytes, 0);
    spool.nextSeq = (spool.entries.at(-1)?.seq ?? 0) + 1;
    if (spool.entries.length) opts.log.info('resuming spooled reports', { count: spool.entries.length, bytes: spool.totalBytes });
    await spool.enforceBounds();
    return spool;
  }

  get length(): number { return this.entries.length; }
  get dir(): string { return this.opts.dir; }
  get bytes(): number { return this.totalBytes; }

  /** Appends one report durably, then applies the bounds (which may drop the oldest ones). */
  async append(body: Buffer, ts: number): Promise<SpoolEntry> {
    const seq = this.nextSeq++;
    const file = path.join(this.opts.dir, `r-${String(seq).padStart(16, '0')}-${ts}.json`);
    await writeDurably(file, body);
    await syncDir(this.opts.dir);
    const entry = { seq, ts, bytes: body.length, file };
    this.entries.push(entry);
    this.totalBytes += entry.bytes;
    await this.enforceBounds();
    return entry;
  }

  /** The oldest report still to send. */
  peek(): SpoolEntry | undefined {
    return this.entries[0];
  }

  /** The oldest reports still to send, in order: at most `maxCount`, and at most `maxBytes` unless the first alone is larger. */
  peekBatch(maxCount: number, maxBytes: number): SpoolEntry[] {
    const out: SpoolEntry[] = [];
    let bytes = 0;
    for (const e of this.entries) {
      if (out.length === maxCount || (out.length && bytes + e.bytes > maxBytes)) break;
      out.push(e);
      bytes += e.bytes;
    }
    return out;
  }

  read(entry: SpoolEntry): Promise<Buffer> {
    return readFile(entry.file);
  }

  /** Removes reports the service answered for (stored, or refused for good: then counted as rejected), with one counters write. */
  async removeMany(entries: SpoolEntry[], outcome: 'delivered' | 'rejected'): Promise<void> {
    const gone = new Set(entries);
    // One pass over the index, not one splice per report: a week's backlog is 60,000 entries.
    this.entries = this.entries.filter((e) => !gone.has(e));
    for (const e of entries) {
      this.totalBytes -= e.bytes;
      await unlinkIfPresent(e.file);
    }
    if (outcome === 'rejected' && entries.length) {
      this.counters.rejected += entries.length;
      await this.saveCounters();
    }
  }

  /** Drops the oldest reports past the age bound, then past the size bound. */
  async enforceBounds(): Promise<void> {
    const oldest = this.now() - this.opts.maxAgeMs;
    const victims: SpoolEntry[] = [];
    let bytes = this.totalBytes;
    for (const e of this.entries) {
      if (e.ts >= oldest && bytes <= this.opts.maxBytes) break;
      victims.push(e);
      bytes -= e.bytes;
    }
    if (!victims.length) return;
    for (const e of victims) await this.forget(e);
    this.counters.dropped += victims.length;
    await this.saveCounters();
    this.opts.log.warn('spool bound reached, dropped oldest reports unsent', {
      dropped: victims.length, droppedTotal: this.counters.dropped, oldestTs: victims[0]!.ts, newestDroppedTs: victims.at(-1)!.ts,
      maxBytes: this.opts.maxBytes, maxAgeMs: this.opts.maxAgeMs,
    });
  }

  private async forget(entry: SpoolEntry): Promise<void> {
    const i = this.entries.indexOf(entry);
    if (i === -1) return;
    this.entries.splice(i, 1);
    this.totalBytes -= entry.bytes;
    await unlinkIfPresent(entry.file);
  }

  private async saveCounters(): Promise<void> {
    await writeDurably(path.join(this.opts.dir, COUNTERS), JSON.stringify(this.counters));
  }
}
