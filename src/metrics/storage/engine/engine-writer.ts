import { AppError, shuttingDown } from '../../../core/errors.js';
import type { AppendOutcome, MetricLimits } from '../../domain/metrics-store.js';
import { appendBatch, forgetGoneHosts, newWriterState, type HeadReport, type WriterState } from './head-writer.js';
import { SealedTimestamps } from './sealed-timestamps.js';
import { createSealDeferral, type SealDeferralSettings } from './seal-deferral.js';
import { scanHead } from './head-windows.js';
import { findSealable, prepareSeal, sealWindows, type PreparedSeal, type SealCandidate, type SealSettings } from './sealer.js';
import { runAgainWhenUndone, type SqlConn } from './sql-conn.js';
import { rollTenantWindows } from './tenant-rollup.js';
import { WINDOW_MS } from './windows.js';
import { WITHDRAWN } from './worker-protocol.js';

/**
 * Everything that writes the engine's tables, over one SqlConn: group commit
 * of appends (one transaction, one fsync, for every report that arrived while
 * the previous one committed), the background seal and tenant-rollup passes,
 * and retention. It runs inside the writer thread (writer-worker.ts) on both
 * backends, so neither a commit nor a seal's encoding ever holds up the HTTP
 * event loop. `R` is how a report reaches it: a HeadReport in the thread, a
 * NewReport on the service's side of the thread (worker-writer.ts).
 */
export interface EngineWriter<R = HeadReport> {
  /**
   * Resolves one outcome per report after the commit that holds them; all of one call share one commit.
   * `signal` aborting while they still wait in the queue withdraws them (nothing stored, the promise rejects).
   * `backlog`: a backlog being replayed (bulk ingest); while such reports come fast, seals wait (seal-deferral.ts).
   */
  append(reports: R[], signal?: AbortSignal, backlog?: boolean): Promise<AppendOutcome[]>;
  /** Retention: drops whole blocks (and head rows, tenant rollups) before `cutoff`, and hosts left with nothing. */
  deleteBefore(cutoff: number): Promise<{ reports: number; hosts: number }>;
  /** Seals every closed window and rolls up every tenant window now (operations and tests; the loop does it on its own). */
  flush(): Promise<void>;
  /** Commits what is queued, stops the loops; later appends are refused. */
  close(): Promise<void>;
}

export interface WriterOptions {
  limits: MetricLimits;
  seal: SealSettings;
  /** Seals wait (a bounded time) while backlog appends arrive faster than a rate: seal-deferral.ts. */
  deferral: SealDeferralSettings;
  /** The service clock (report times are judged against it). */
  now: () => number;
  /** Reports per commit at most. */
  maxBatch: number;
  /** Reports waiting for a commit at most; past it appends are refused with 503 so memory stays bounded under a slow disk. */
  maxQueued: number;
  /** Period of the seal and rollup passes; 0 disables the loop (flush() still works). */
  sealIntervalMs: number;
  /** PostgreSQL: how often a pass scans the head for windows other instances appended to (and stopped before sealing). */
  headScanIntervalMs: number;
}

export const DEFAULT_WRITER_OPTIONS = {
  maxBatch: 2_000,
  maxQueued: 50_000,
  sealIntervalMs: 500,
  headScanIntervalMs: 60_000,
  seal: { graceMs: 120_000, idleMs: 500 },
  // Agents send bulk bodies only to drain a spool; at 1,000 reports/s a backlog is being replayed. 2 minutes: the grace
  // a closed window already waits for late reports.
  deferral: { busyReportsPerS: 1_000, maxMs: 120_000 },
} as const;

/** Append transactions in flight at once on PostgreSQL (each on its own pooled connection). */
const PG_COMMITS_IN_FLIGHT = 4;
/**
 * Host windows sealed in one transaction at most (sealer.ts, sealWindows), and their head rows at most (a window with
 * more goes alone): enough that windows whose head rows share pages log them once; few enough that the transaction,
 * which appends wait behind and whose pages the WAL holds until a checkpoint, stays about one large window's size.
 */
const SEAL_GROUP = 8;
export const SEAL_GROUP_ROWS = 1_000;
/** Seconds a refused append is told to wait. */
const RETRY_AFTER_S = 1;
/**
 * SQLite: pages a turn of the chain hands back to the filesystem at most (4 ms of work on an idle writer, up to 75 ms
 * measured on a busy one: an append arriving meanwhile waits no longer), and turns a pass takes for it at most.
 */
export const VACUUM_STEP_PAGES = 200;
const VACUUM_STEPS_PER_PASS = 100;
/**
 * Turns a pass that follows appends takes for it at most: 5,000 pages keeps pace with the seals of a backfill (5 turns
 * left the small peers set's head to be handed back while its queries ran: host query p95 18 ms instead of 7-13) and
 * spreads a 10,000-host fleet's top of the hour over a minute.
 */
export const VACUUM_STEPS_PER_BUSY_PASS = 25;
/** How often at most a seal pass on PostgreSQL vacuums the head table. */
const HEAD_VACUUM_INTERVAL_MS = 10_000;
const SYNC_FAILED = 'the storage log could not be synced to disk; restart the service';

type Job = { reports: HeadReport[]; backlog: boolean; resolve: (o: AppendOutcome[]) => void; reject: (e: unknown) => void; forget: () => void };

/**
 * `syncLog`, when given, makes the log durable (SQLite: fsync of the WAL file, on libuv's pool). Appends then commit
 * without waiting for the disk inside the transaction and are answered after a sync that began after their commit,
 * so the next batch commits while the previous one's fsync runs (group commit, pipelined). Without it (PostgreSQL),
 * each append transaction's commit is durable by itself.
 */
export function createEngineWriter(conn: SqlConn, opts: WriterOptions, onError: (e: unknown) => void, syncLog?: () => Promise<void>): EngineWriter<HeadReport> {
  const state = newWriterState();
  const sealed = new SealedTimestamps();
  const wallNow = () => Date.now();
  const deps = { conn, state, limits: opts.limits, sealed, wallNow, now: opts.now, syncedByCaller: syncLog !== undefined };
  const durable = syncLog ? pipelinedSync(syncLog) : undefined;
  // A failed fsync leaves what the log holds unknown (the kernel may drop the dirty pages and report success
  // later), so after one nothing more is acknowledged: the service must be restarted, as PostgreSQL does.
  let syncFailed: unknown;
  const queue: Job[] = [];
  let queued = 0;
  let closed = false;
  const deferral = createSealDeferral(opts.deferral, wallNow());
  // One chain of background work (seals, rollups, retention). On SQLite appends join it too: a transaction must
  // never interleave with another on the same connection. On PostgreSQL appends run beside it on other
  // connections, a few commits in flight at once so that round trips overlap instead of adding up.
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => undefined);
    return run;
  };
  const parallel = conn.dialect === 'postgres' ? PG_COMMITS_IN_FLIGHT : 1;
  const runAppend = conn.dialect === 'sqlite' ? serial : <T>(fn: () => Promise<T>) => fn();
  let active = 0;
  let syncing = 0;
  let scheduled = false;
  let idle: (() => void) | undefined;

  function scheduleDrain(): void {
    if (scheduled) return;
    scheduled = true;
    // One macrotask turn first: requests whose bytes already arrived get to join this commit.
    setImmediate(() => {
      scheduled = false;
      while (active < parallel && queue.length) {
        active++;
        let settle: (() => Promise<void>) | undefined;
        void runAppend(async () => { settle = await commitOnce(); }).finally(() => {
          active--;
          // The commit is done: the next batch may commit while this one's sync runs.
          if (queue.length) scheduleDrain();
          if (!settle) { if (active === 0 && syncing === 0 && !queue.length) idle?.(); return; }
          syncing++;
          void settle().finally(() => {
            syncing--;
            if (active === 0 && syncing === 0 && !queue.length) idle?.();
          });
        });
      }
      if (active === 0 && syncing === 0 && !queue.length) idle?.();
    });
  }

  /**
   * Takes what is queued (whole calls, up to maxBatch reports) and commits it in one transaction; returns what
   * answers them, which with `syncLog` first waits for the sync (outside the chain of transactions).
   */
  async function commitOnce(): Promise<(() => Promise<void>) | undefined> {
    const jobs: Job[] = [];
    let n = 0;
    while (queue.length && (n === 0 || n + queue[0]!.reports.length <= opts.maxBatch)) {
      const job = queue.shift()!;
      job.forget();
      jobs.push(job);
      n += job.reports.length;
    }
    if (!jobs.length) return undefined;
    queued -= n;
    deferral.appended(jobs.reduce((sum, j) => sum + (j.backlog ? j.reports.length : 0), 0));
    const refuse = (): void => { for (const job of jobs) job.reject(new AppError('unavailable', SYNC_FAILED)); };
    if (syncFailed !== undefined) { refuse(); return undefined; }
    const outcomes = await appendBatch(deps, jobs.flatMap((j) => j.reports));
    const answer = (): void => {
      let at = 0;
      for (const job of jobs) {
        const mine = outcomes.slice(at, at + job.reports.length);
        at += job.reports.length;
        const failed = mine.find((o) => o.status === 'error');
        if (failed) job.reject(failed.status === 'error' ? failed.error : undefined);
        else job.resolve(mine as AppendOutcome[]);
      }
    };
    if (!durable) { answer(); return undefined; }
    // A later sync succeeding says nothing of frames an earlier, failed one should have written (the WAL's checksums
    // chain from frame to frame): once one failed, no batch is answered, whatever its own sync says.
    return () => durable().then(() => (syncFailed === undefined ? answer() : refuse()), (e: unknown) => {
      if (syncFailed === undefined) { syncFailed = e; onError(e); }
      refuse();
    });
  }

  /** Resolves once nothing is queued, committing or waiting for its sync. */
  function drained(): Promise<void> {
    if (!queue.length && active === 0 && syncing === 0 && !scheduled) return Promise.resolve();
    return new Promise((resolve) => { idle = () => { idle = undefined; resolve(); }; });
  }

  /**
   * Finds what is due and seals it a few windows per turn of the work chain
   * (SEAL_GROUP), so appends that arrive meanwhile commit between two groups
   * instead of after the whole pass; each block is built and compressed before
   * its turn (prepareSeal), while appends commit. While a backlog is replayed at a
   * burst's rate, windows wait, within a bound (seal-deferral.ts).
   */
  async function sealPass(force: boolean): Promise<void> {
    const quiet = arrivedSincePass === 0;
    arrivedSincePass = 0;
    // The head's windows are known from the appends (head-windows.ts); the head itself is scanned at the first pass
    // and on a forced one, and on PostgreSQL now and then for windows only other instances appended to.
    if (force || lastHeadScan === undefined || (conn.dialect === 'postgres' && wallNow() - lastHeadScan >= opts.headScanIntervalMs)) {
      lastHeadScan = wallNow();
      await serial(() => scanHead(conn, state.headWindows));
    }
    const found = findSealable(state.headWindows, opts.seal, opts.now(), wallNow(), state, force);
    const due = force ? found : deferral.pick(found, wallNow());
    let group: Array<{ c: SealCandidate & { generation: number }; prepared: PreparedSeal }> = [];
    let groupRows = 0;
    const seal = async (): Promise<void> => {
      const sealing = group;
      group = [];
      groupRows = 0;
      if (!sealing.length) return;
      await serial(async () => {
        const done = await sealWindows(conn, sealing, wallNow());
        sealing.forEach(({ c }, i) => { if (done[i]) state.headWindows.forget(c.hostKey, c.windowStart, c.generation); });
      });
    };
    for (const c of due) {
      if (closed && !force) return;
      if (!force && !deferral.mayGoOn(c, wallNow())) continue;
      const prepared = await prepareSeal(conn, c);
      // No rows left (sealed by another instance, or the entry outlived a rolled-back append): nothing to track.
      if (!prepared) { state.headWindows.forget(c.hostKey, c.windowStart, c.generation); continue; }
      if (group.length === SEAL_GROUP || groupRows + prepared.head.length > SEAL_GROUP_ROWS) await seal();
      group.push({ c, prepared });
      groupRows += prepared.head.length;
    }
    if (closed && !force) return;
    await seal();
    const rolled = await rollTenantWindows(conn, wallNow(), force ? 0 : opts.seal.idleMs, force ? 1_000_000 : 32, serial);
    if (conn.dialect === 'sqlite') {
      // Hand the pages the sealed head rows freed back to the filesystem, a bounded number per turn of the chain, and
      // few per pass while reports arrive (the next rows reuse free pages anyway). Handing back the 300,000 pages of a
      // 10,000-host fleet's sealed head in one statement held every append for 6 s. A forced pass (flush, close)
      // hands back everything.
      const steps = force ? Number.POSITIVE_INFINITY : closed ? 0 : quiet ? VACUUM_STEPS_PER_PASS : VACUUM_STEPS_PER_BUSY_PASS;
      for (let step = 0; (due.length || rolled || pagesToFree) && step < steps; step++) {
        pagesToFree = await serial(async () => {
          // exec, not a prepared run: each step of this pragma frees one page.
          await conn.exec(`PRAGMA incremental_vacuum(${VACUUM_STEP_PAGES})`);
          const [free] = await conn.all<{ freelist_count: number }>('PRAGMA freelist_count');
          return Number(free?.freelist_count ?? 0) > 0;
        });
        if (!pagesToFree) break;
      }
      await serial(async () => {
        // Copy the WAL into the file here, once a pass, more than inside appends' commits (SQLite's automatic
        // checkpoint, kept as the backstop at 4 MiB instead of 1): a host's newest page is rewritten in commit after
        // commit, and a checkpoint copies only its last version, so fewer checkpoints copy far less (appends' commits
        // took 35 % less time on the small peers set, measured).
        // PASSIVE never waits for a reader. Once it has copied everything and no append waits, TRUNCATE cuts the WAL
        // file back to nothing (waiting, if need be, for readers still on the WAL's pages).
        const [done] = await conn.all<{ log: number; checkpointed: number }>('PRAGMA wal_checkpoint(PASSIVE)');
        if (!queue.length && done && done.log > 0 && done.checkpointed === done.log) await conn.all('PRAGMA wal_checkpoint(TRUNCATE)');
      });
    }
    if (conn.dialect === 'postgres' && due.length && wallNow() - lastHeadVacuum >= HEAD_VACUUM_INTERVAL_MS) {
      // The head is a queue (rows in, sealed rows out): its dead rows must be made reusable as fast as they appear,
      // or the table grows to most of a backlog's size. Autovacuum looks at it once a minute at best (its naptime).
      // Outside the chain of appends (another connection); SKIP_LOCKED: an instance already vacuuming it is enough.
      lastHeadVacuum = wallNow();
      await conn.exec('VACUUM (SKIP_LOCKED) reports');
    }
  }
  let lastHeadVacuum = 0;
  let lastHeadScan: number | undefined;
  /** SQLite: free pages were left in the file by the last pass (it frees a bounded number). */
  let pagesToFree = false;
  /** Reports that arrived since the last seal pass began. */
  let arrivedSincePass = 0;

  let passing: Promise<void> | undefined;
  const timer = opts.sealIntervalMs > 0
    ? setInterval(() => {
      if (closed || passing) return;
      passing = sealPass(false).catch(onError).finally(() => { passing = undefined; });
    }, opts.sealIntervalMs)
    : undefined;
  timer?.unref();

  return {
    append(reports, signal, backlog = false) {
      if (closed) return Promise.reject(shuttingDown());
      if (syncFailed !== undefined) return Promise.reject(new AppError('unavailable', SYNC_FAILED));
      if (signal?.aborted) return Promise.reject(new AppError('unavailable', WITHDRAWN));
      if (queued + reports.length > opts.maxQueued) {
        return Promise.reject(new AppError('unavailable', `${queued} reports are waiting for the disk; retry shortly`, { retry_after: RETRY_AFTER_S }));
      }
      return new Promise((resolve, reject) => {
        const withdraw = (): void => {
          const at = queue.indexOf(job);
          if (at < 0) return;
          queue.splice(at, 1);
          queued -= reports.length;
          reject(new AppError('unavailable', WITHDRAWN));
        };
        const job: Job = { reports, backlog, resolve, reject, forget: () => signal?.removeEventListener('abort', withdraw) };
        signal?.addEventListener('abort', withdraw, { once: true });
        queue.push(job);
        queued += reports.length;
        arrivedSincePass += reports.length;
        scheduleDrain();
      });
    },
    deleteBefore: (cutoff) => serial(() => deleteBefore(conn, state, cutoff)),
    async flush() {
      await passing;
      await sealPass(true);
    },
    async close() {
      closed = true;
      if (timer) clearInterval(timer);
      await passing;
      await drained();
      await chain;
    },
  };
}

/**
 * Retention's statements. Each reaches only what expired, through an index: per host (or tenant) a range of the
 * key's time column, and blocks by their window's start. Written as `window_start + 1 h <= cutoff` they read every
 * block kept (7 million rows for 10,000 hosts over 30 days), in the writer's chain on SQLite, every sweep.
 * Parameters: the cutoff, or the last window start that expired whole (`cutoff - WINDOW_MS`).
 */
export const RETENTION_SQL = {
  head: 'DELETE FROM reports WHERE host_key IN (SELECT key FROM hosts) AND ts < ?',
  sealedRows: 'SELECT SUM(rows) AS n FROM blocks WHERE window_start <= ?',
  blocks: 'DELETE FROM blocks WHERE window_start <= ?',
  tenantWindows: 'DELETE FROM tenant_windows WHERE tenant_id IN (SELECT id FROM tenants) AND window_start <= ?',
} as const;

/**
 * Retention (EngineWriter.deleteBefore), then the writer's caches let go of every host no longer in the database,
 * whichever instance's sweep removed it.
 */
export async function deleteBefore(conn: SqlConn, state: WriterState, cutoff: number): Promise<{ reports: number; hosts: number }> {
  const removed = await deleteExpired(conn, cutoff);
  await forgetGoneHosts(conn, state);
  return removed;
}

/** Retention's transaction may be PostgreSQL's deadlock victim against another instance's append of the same hosts: run again, as appends are. */
function deleteExpired(conn: SqlConn, cutoff: number): Promise<{ reports: number; hosts: number }> {
  return runAgainWhenUndone(() => deleteExpiredOnce(conn, cutoff));
}

async function deleteExpiredOnce(conn: SqlConn, cutoff: number): Promise<{ reports: number; hosts: number }> {
  // Whole windows only: a block (and a tenant rollup) goes once its whole window is before the cutoff.
  const lastExpiredWindow = cutoff - WINDOW_MS;
  return conn.transaction(async (tx) => {
    // The head first: on PostgreSQL this waits for a seal holding those rows, so the block it commits is seen (and
    // dropped) by the statements below, each with a newer snapshot; a seal that comes later finds its rows gone and
    // undoes itself (sealer.ts).
    const head = await tx.run(RETENTION_SQL.head, [cutoff]);
    const [sealedRows] = await tx.all<{ n: number | string | null }>(RETENTION_SQL.sealedRows, [lastExpiredWindow]);
    await tx.run(RETENTION_SQL.blocks, [lastExpiredWindow]);
    await tx.run(RETENTION_SQL.tenantWindows, [lastExpiredWindow]);
    const empty = 'NOT EXISTS (SELECT 1 FROM reports r WHERE r.host_key = hosts.key) AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.host_key = hosts.key)';
    if (conn.dialect === 'sqlite') return { reports: Number(sealedRows?.n ?? 0) + head, hosts: await tx.run(`DELETE FROM hosts WHERE ${empty}`) };
    // PostgreSQL, read committed: a report another instance is inserting for a host is invisible to this snapshot, and
    // the cascade would delete it with the host after its commit. So lock the empty-looking hosts first (skipping any an
    // insert holds: its foreign-key check keeps a share lock until it commits), and test them again in a new statement,
    // whose snapshot sees every insert that committed before the lock; inserts after it wait for this commit.
    const locked = await tx.all<{ key: number }>(`SELECT key FROM hosts WHERE ${empty} FOR UPDATE SKIP LOCKED`);
    const gone = locked.length ? await tx.run(`DELETE FROM hosts WHERE key = ANY(?) AND ${empty}`, [locked.map((r) => r.key)]) : 0;
    return { reports: Number(sealedRows?.n ?? 0) + head, hosts: gone };
  });
}

/**
 * Returns a function whose promise settles after a call of `sync` that began after it was called: calls that
 * arrive while one runs share the next one, so there is at most one running and one waiting, whatever the load.
 */
export function pipelinedSync(sync: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const start = (): Promise<void> => {
    const p = sync();
    running = p;
    const clear = (): void => { if (running === p) running = undefined; };
    p.then(clear, clear);
    return p;
  };
  return () => {
    if (!running) return start();
    next ??= running.then(() => undefined, () => undefined).then(() => { next = undefined; return start(); });
    return next;
  };
}
