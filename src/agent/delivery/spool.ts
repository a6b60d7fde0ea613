import { readdirSync, readFileSync, statSync } from 'node:fs';
import { open, readdir, readFile, rename, statfs, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../logger.js';
import { makeDir } from '../../core/make-dir.js';

/**
 * One spooled report: a file `r-<seq>-<ts>.json` holding the exact body to send. Its path is not kept (`Spool` derives
 * it): the index of a week of backlog is 60,000 entries, and the paths alone would double its memory.
 */
export interface SpoolEntry {
  seq: number;
  /** The report's own timestamp (epoch ms), used for the age bound. */
  ts: number;
  bytes: number;
  /** Set when the report's file could not be written (a full disk): it is held here, in memory, instead. */
  body?: Buffer;
}

export interface SpoolOptions {
  dir: string;
  /** Total bytes of spooled reports kept; past it the oldest are dropped. */
  maxBytes: number;
  /** Reports older than this (by their `ts`) are dropped. */
  maxAgeMs: number;
  /** While the spool's filesystem has less free (for an unprivileged process), new reports are held in memory; 0: never. */
  minFreeBytes?: number;
  /** Free bytes of a directory's filesystem (statfs), replaceable in tests. */
  freeBytes?: (dir: string) => number | Promise<number>;
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

/** What `Spool.survey` found in a spool: its reports, their bytes, and the oldest's age by its `ts`. */
export interface SpoolSurvey {
  reports: number;
  bytes: number;
  oldestAgeMs: number;
}

/** Exactly the names `append` writes (no leading zero in ts), so a name can be derived again from (seq, ts). */
const NAME = /^r-(\d{16})-(0|[1-9]\d*)\.json$/;
const COUNTERS = 'counters.json';
/** Read errors that no later try can cure: such a report is counted as rejected rather than retried for ever. */
const FOR_GOOD = new Set(['ENOENT', 'EISDIR', 'EACCES', 'EPERM', 'ENOTDIR']);
/**
 * Spool files read in one go before the event loop gets a turn. Synchronously: a small file in the page cache takes
 * microseconds, a promise round trip through the thread pool several times that in CPU (a week's backlog is 60,000
 * files). 64 of them block the loop for well under a millisecond.
 */
const READ_CHUNK = 64;
/**
 * Unlinks run concurrently in the thread pool, this many at a time: unlink can wait on the disk (hundreds of
 * microseconds each in a directory of 60,000 entries), which must not block the loop.
 */
const UNLINK_CONCURRENCY = 4;
/**
 * Bytes of reports held in memory while the spool cannot be written (the host's disk full, a read-only remount): about
 * 8 hours of 2.6 KiB reports every 10 s. Monitoring matters most then, so reports keep flowing from memory rather than
 * stopping; past this the oldest held are dropped, and all of them are lost if the agent stops before they are sent.
 */
export const MEMORY_MAX_BYTES = 8 * 1024 * 1024;

/** Makes each temporary file's name unique, so two writes of one file (in this process or another) never share one. */
let tmpSeq = 0;

async function writeDurably(file: string, data: Buffer | string): Promise<void> {
  const tmp = `${file}.${process.pid}-${++tmpSeq}.tmp`;
  try {
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (e: unknown) {
    // A full disk fails every interval's write: each must not leave its temporary file behind until a restart. The
    // write's own error is the one to report, not the unlink's.
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
}

/** A spool's `counters.json`; throws when it is missing (ENOENT) or unreadable. */
async function readCounters(dir: string): Promise<SpoolCounters> {
  const raw = JSON.parse(await readFile(path.join(dir, COUNTERS), 'utf8')) as Partial<SpoolCounters>;
  return { dropped: Number(raw.dropped) || 0, rejected: Number(raw.rejected) || 0 };
}

async function unlinkIfPresent(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (e: unknown) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/**
 * Free bytes of `dir`'s filesystem for an unprivileged process; Infinity when they cannot be read (the write will
 * tell). In the thread pool, as the write is: a hung network filesystem must not stop the event loop.
 */
async function freeBytesOf(dir: string): Promise<number> {
  try {
    const s = await statfs(dir);
    return s.bavail * s.bsize;
  } catch {
    return Infinity;
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
 * age: the oldest reports go first, counted in `counters.json` and logged. A
 * report whose file cannot be written (a full disk) is held in memory in its
 * place until the spool can be written again (`MEMORY_MAX_BYTES`).
 */
export class Spool {
  private entries: SpoolEntry[] = [];
  private totalBytes = 0;
  /** Unlinks of removed reports still running (`removeMany`), in order. */
  private unlinking: Promise<void> = Promise.resolve();
  /** The last `counters.json` write: the collection and delivery loops both count, and writes must land in order. */
  private savingCounters: Promise<void> = Promise.resolve();
  private nextSeq = 1;
  /** Bytes of the entries held in memory (`body` set). */
  private memoryBytes = 0;
  /** The last write failed (or the floor held it back): said when that starts and when it ends. */
  private holding = false;
  private readonly now: () => number;
  private constructor(private readonly opts: SpoolOptions, readonly counters: SpoolCounters) {
    this.now = opts.now ?? Date.now;
  }

  /** Opens (creating) the spool directory and indexes what a previous run left; half-written files are removed. */
  static async open(opts: SpoolOptions): Promise<Spool> {
    makeDir(opts.dir, 0o700, 'the spool directory');
    let counters: SpoolCounters = { dropped: 0, rejected: 0 };
    try {
      counters = await readCounters(opts.dir);
    } catch (e: unknown) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') opts.log.warn('spool counters unreadable, starting from zero', { error: String(e) });
    }
    const spool = new Spool(opts, counters);
    for (const name of await readdir(opts.dir)) {
      if (name.endsWith('.tmp')) { await unlink(path.join(opts.dir, name)); continue; }
      const m = NAME.exec(name);
      if (!m) continue;
      // Synchronously: nothing else runs before the spool is open, and a week of backlog (60,000 files) is
      // indexed in a fraction of a second instead of seconds of promise round trips.
      spool.entries.push({ seq: Number(m[1]), ts: Number(m[2]), bytes: statSync(path.join(opts.dir, name)).size });
    }
    spool.entries.sort((a, b) => a.seq - b.seq);
    spool.totalBytes = spool.entries.reduce((s, e) => s + e.bytes, 0);
    spool.nextSeq = (spool.entries.at(-1)?.seq ?? 0) + 1;
    if (spool.entries.length) opts.log.info('resuming spooled reports', { count: spool.entries.length, bytes: spool.totalBytes });
    await spool.enforceBounds();
    return spool;
  }

  /**
   * What a spool this agent does not deliver holds (another destination's: an old URL or token, or another agent's),
   * read without opening or changing it, as its own agent may be using it.
   */
  static survey(dir: string, now: number): SpoolSurvey {
    const survey: SpoolSurvey = { reports: 0, bytes: 0, oldestAgeMs: 0 };
    for (const name of readdirSync(dir)) {
      const m = NAME.exec(name);
      if (!m) continue;
      try {
        survey.bytes += statSync(path.join(dir, name)).size;
      } catch (e: unknown) {
        // Delivered (unlinked) by that spool's agent meanwhile.
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw e;
      }
      survey.reports++;
      survey.oldestAgeMs = Math.max(survey.oldestAgeMs, now - Number(m[2]));
    }
    return survey;
  }

  get length(): number { return this.entries.length; }
  get dir(): string { return this.opts.dir; }
  get bytes(): number { return this.totalBytes; }
  /** Reports held in memory because their files could not be written. */
  get inMemory(): number { return this.entries.reduce((n, e) => n + (e.body ? 1 : 0), 0); }

  /**
   * Appends one report durably, then applies the bounds (which may drop the oldest ones). A report whose file cannot
   * be written is held in memory instead (`MEMORY_MAX_BYTES`), in its place in the order, and the failure logged once.
   */
  async append(body: Buffer, ts: number): Promise<SpoolEntry> {
    const seq = this.nextSeq++;
    const entry: SpoolEntry = { seq, ts, bytes: body.length };
    const refused = await this.refusal(entry, body);
    if (refused === undefined) {
      if (this.holding) await this.resume();
    } else {
      if (!this.holding) {
        this.opts.log.error('the spool cannot be written: reports are held in memory until it can, and lost if the agent stops first', {
          error: refused, maxMemoryBytes: MEMORY_MAX_BYTES, spoolDir: this.opts.dir,
        });
      }
      this.holding = true;
      entry.body = body;
      this.memoryBytes += body.length;
    }
    this.entries.push(entry);
    this.totalBytes += entry.bytes;
    await this.enforceBounds();
    return entry;
  }

  /** Why `body` is not `entry`'s file: free space under the floor, or the write failing; undefined once it is written. */
  private async refusal(entry: SpoolEntry, body: Buffer): Promise<string | undefined> {
    const floor = this.opts.minFreeBytes ?? 0;
    if (floor > 0) {
      const free = await (this.opts.freeBytes ?? freeBytesOf)(this.opts.dir);
      if (free < floor) return `the spool's filesystem has ${free} bytes free, under --spool-min-free-bytes (${floor})`;
    }
    try {
      await writeDurably(this.fileOf(entry), body);
      await syncDir(this.opts.dir);
      return undefined;
    } catch (e: unknown) {
      // The rename may have landed before the directory's fsync failed: the file is not to be trusted, nor left to be sent twice.
      await unlinkIfPresent(this.fileOf(entry)).catch(() => undefined);
      return e instanceof Error ? e.message : String(e);
    }
  }

  /** The spool can be written again: what was held goes to its files, and counts made meanwhile to counters.json. */
  private async resume(): Promise<void> {
    this.holding = false;
    const held = this.inMemory;
    await this.writeHeld();
    await this.saveCounters();
    this.opts.log.info('the spool can be written again; the reports held in memory are written to it', { held, stillInMemory: this.inMemory });
  }

  /**
   * Writes the reports held in memory to their files, oldest first, until one fails (the disk still full): once
   * written they survive a stop. Called when the spool can be written again, and when the agent stops.
   */
  async writeHeld(): Promise<void> {
    const held = this.entries.filter((e) => e.body);
    for (const entry of held) {
      try {
        await writeDurably(this.fileOf(entry), entry.body!);
      } catch {
        break;
      }
      // Sent and removed while it was being written: its file must not be sent again after a restart.
      if (!this.has(entry)) { await unlinkIfPresent(this.fileOf(entry)).catch(() => undefined); continue; }
      this.memoryBytes -= entry.bytes;
      delete entry.body;
    }
    if (held.length) await syncDir(this.opts.dir).catch(() => undefined);
  }

  /** The oldest report still to send. */
  peek(): SpoolEntry | undefined {
    return this.entries[0];
  }

  /**
   * The oldest reports still to send after the first `skip`, in order: at most `maxCount`, and at most `maxBytes`
   * unless the first alone is larger.
   */
  peekBatch(maxCount: number, maxBytes: number, skip = 0): SpoolEntry[] {
    const out: SpoolEntry[] = [];
    let bytes = 0;
    for (let i = skip; i < this.entries.length; i++) {
      const e = this.entries[i]!;
      if (out.length === maxCount || (out.length && bytes + e.bytes > maxBytes)) break;
      out.push(e);
      bytes += e.bytes;
    }
    return out;
  }

  /**
   * The bodies of `entries`, in order, read a chunk of files at a time rather than all at once. An entry whose file
   * can never be sent (gone, unreadable for good, blank, or not one JSON document: removed or damaged from outside,
   * since the agent writes each atomically) is not yielded but put in `unsendable` with why; every other one is put in
   * `read`, in order. Other read errors (EIO) are thrown: the report stays spooled for a later try.
   */
  async *readMany(entries: SpoolEntry[], read: SpoolEntry[], unsendable: Array<{ entry: SpoolEntry; why: string }>): AsyncGenerator<Buffer> {
    for (let i = 0; i < entries.length; i += READ_CHUNK) {
      if (i) await new Promise<void>((resolve) => setImmediate(resolve));
      const chunk: Buffer[] = [];
      for (const entry of entries.slice(i, i + READ_CHUNK)) {
        const body = this.readBody(entry);
        if (typeof body === 'string') unsendable.push({ entry, why: body });
        else { read.push(entry); chunk.push(body); }
      }
      yield* chunk;
    }
  }

  /** A spooled report's bytes, or why it can never be sent. */
  private readBody(entry: SpoolEntry): Buffer | string {
    if (entry.body) return entry.body;
    let body: Buffer;
    try {
      body = readFileSync(this.fileOf(entry));
    } catch (e: unknown) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code && FOR_GOOD.has(code)) return `its file cannot be read (${code})`;
      throw e;
    }
    // Blank as the service judges a bulk line (String.prototype.trim: a form feed, NBSP, U+2028, a BOM too), which it
    // skips without a result: sent, such a file left the answer a result short, and the batch was retried for ever.
    if (body.toString('utf8').trim() === '') return 'its file is blank';
    // One line, as the agent writes it, goes as it is (the service judges it); a body of several lines is sent
    // re-serialized on one line, so it must parse.
    if (body.includes(0x0a)) {
      try { JSON.parse(body.toString('utf8')); } catch { return 'its file is not one JSON document'; }
    }
    return body;
  }

  /**
   * Removes reports the service answered for (stored, or refused for good: then counted as rejected), with one
   * counters write. They leave the index at once; their files are unlinked in the background (`settled` waits for
   * that), so the next batch is not held up by a thousand unlinks. A file left behind (a crash meanwhile, an unlink
   * that failed) is sent again after a restart and answered `duplicate`.
   */
  async removeMany(entries: SpoolEntry[], outcome: 'delivered' | 'rejected'): Promise<void> {
    const gone = new Set(entries);
    // The index is in seq order and removals are at its head (a batch, maybe less a line the service rejected), so
    // only the entries up to the last one removed are looked at, and the gap is closed in place: a week's backlog is
    // 60,000 entries, and a copy of the index per batch would be garbage the size of the index. A report the bound
    // dropped while it was in flight is no longer there and no longer counted in the bytes.
    const last = entries.reduce((m, e) => Math.max(m, e.seq), -1);
    const list = this.entries;
    let kept = 0;
    let read = 0;
    for (; read < list.length && list[read]!.seq <= last; read++) {
      const e = list[read]!;
      if (gone.has(e)) this.untrack(e);
      else list[kept++] = e;
    }
    list.splice(kept, read - kept);
    const files = entries.filter((e) => !e.body).map((e) => this.fileOf(e));
    this.unlinking = this.unlinking.then(async () => {
      const unlinkOne = (file: string) => unlinkIfPresent(file).catch((e: unknown) => {
        this.opts.log.error('the service answered for a spooled report but its file could not be removed; it is sent again after a restart', { file, error: String(e) });
      });
      for (let i = 0; i < files.length; i += UNLINK_CONCURRENCY) await Promise.all(files.slice(i, i + UNLINK_CONCURRENCY).map(unlinkOne));
    });
    if (outcome === 'rejected' && entries.length) {
      this.counters.rejected += entries.length;
      await this.saveCounters();
    }
  }

  /** Resolves once the files of every report removed so far are unlinked (or their failure logged). */
  settled(): Promise<void> {
    return this.unlinking;
  }

  /** Drops the oldest reports past the age bound, then past the size bound, and the oldest held in memory past theirs. */
  async enforceBounds(): Promise<void> {
    const oldest = this.now() - this.opts.maxAgeMs;
    const victims: SpoolEntry[] = [];
    let bytes = this.totalBytes;
    let memory = this.memoryBytes;
    for (const e of this.entries) {
      if (e.ts >= oldest && bytes <= this.opts.maxBytes && memory <= MEMORY_MAX_BYTES) break;
      if (e.ts >= oldest && bytes <= this.opts.maxBytes && !e.body) continue;
      victims.push(e);
      bytes -= e.bytes;
      if (e.body) memory -= e.bytes;
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
    this.untrack(entry);
    if (!entry.body) await unlinkIfPresent(this.fileOf(entry));
  }

  /** Whether `entry` is still in the index (sorted by seq: a binary search, the index may hold a week of reports). */
  private has(entry: SpoolEntry): boolean {
    let lo = 0;
    let hi = this.entries.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const seq = this.entries[mid]!.seq;
      if (seq === entry.seq) return this.entries[mid] === entry;
      if (seq < entry.seq) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  }

  private untrack(entry: SpoolEntry): void {
    this.totalBytes -= entry.bytes;
    if (entry.body) this.memoryBytes -= entry.bytes;
  }

  private fileOf(entry: SpoolEntry): string {
    return path.join(this.opts.dir, `r-${String(entry.seq).padStart(16, '0')}-${entry.ts}.json`);
  }

  /**
   * Writes the counters as they are when its turn comes, after any write still running, so the last one wins. A write
   * that fails (a full disk) is logged, not thrown: the counts stay in memory and the next write that can carries them.
   */
  private saveCounters(): Promise<void> {
    const save = this.savingCounters.then(() => writeDurably(path.join(this.opts.dir, COUNTERS), JSON.stringify(this.counters)))
      .catch((e: unknown) => this.opts.log.warn('spool counters could not be saved; kept in memory', { error: e instanceof Error ? e.message : String(e) }));
    this.savingCounters = save;
    return save;
  }
}
