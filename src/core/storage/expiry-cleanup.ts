import { setImmediate as yieldToIo } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Database } from './database.js';

/**
 * Rows that expire: those of `table` whose `column` (epoch ms) is at or below
 * `cutoff(now)`. A NULL `column` never expires.
 */
export interface ExpiryRule {
  /** Names the rule in results and logs. */
  name: string;
  table: string;
  /** A unique column that addresses one row (the primary key). */
  key: string;
  column: string;
  cutoff(now: number): number;
}

export interface CleanupBounds {
  /** Rows per DELETE: small, so each statement holds its locks (and SQLite's writer) briefly. */
  batchSize: number;
  /** Batches per rule per run, so one run's work is bounded whatever the backlog. */
  maxBatches: number;
}

/** Small batches as supabase/auth's cleanup does; 20 x 500 rows per rule per run clears any steady backlog. */
export const CLEANUP_BOUNDS: CleanupBounds = { batchSize: 500, maxBatches: 20 };

/**
 * Deletes at most `limit` expired rows of one rule; returns how many. On
 * PostgreSQL the batch is chosen `FOR UPDATE SKIP LOCKED`: instances cleaning
 * at the same moment take disjoint rows and never wait on each other or on a
 * request that holds one of the rows. SQLite has a single writer, so batches
 * of two processes simply take turns.
 */
export async function deleteExpiredBatch<DB>(database: Database<DB>, rule: ExpiryRule, now: number, limit: number): Promise<number> {
  const table = sql.table(rule.table);
  const key = sql.ref(rule.key);
  const column = sql.ref(rule.column);
  const cutoff = rule.cutoff(now);
  const lock = database.dialect === 'postgres' ? sql`FOR UPDATE SKIP LOCKED` : sql``;
  const r = await sql`DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${column} <= ${cutoff} LIMIT ${limit} ${lock})`.execute(database.db);
  return Number(r.numAffectedRows ?? 0);
}

/** One cleanup run: each rule in turn, batch after batch until a short batch or the bound. Returns rows removed per rule. */
export async function runExpiryCleanup<DB>(database: Database<DB>, rules: readonly ExpiryRule[], now: number, bounds: CleanupBounds = CLEANUP_BOUNDS): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const rule of rules) {
    let total = 0;
    for (let i = 0; i < bounds.maxBatches; i++) {
      const n = await deleteExpiredBatch(database, rule, now, bounds.batchSize);
      total += n;
      if (n < bounds.batchSize) break;
      // Between batches, let requests waiting for the database (or the event loop) go first.
      await yieldToIo();
    }
    removed[rule.name] = total;
  }
  return removed;
}

/** Cleanup that is more than a DELETE of rows (rows with files to remove first); returns how many things went. */
export interface CleanupTask {
  name: string;
  run(now: number): Promise<number>;
}

export interface CleanupSchedule<DB> {
  database: Database<DB>;
  rules: readonly ExpiryRule[];
  /** Run after the rules, in order, on the same schedule. */
  tasks?: readonly CleanupTask[];
  /** Mean time between runs; each wait is drawn from [0.5, 1.5) of it. */
  intervalMs: number;
  now: () => number;
  /** After each run: rows removed per rule (and things per task), or the error that stopped it. */
  onRun(result: Record<string, number> | { error: unknown }): void;
  bounds?: CleanupBounds;
}

/**
 * Runs the cleanup on this instance for as long as it lives. Every instance
 * runs it (nothing to elect, nothing lost when one dies); the random waits
 * keep instances from running in step, SKIP LOCKED keeps two runs that do
 * meet from deleting the same rows, and a run never starts while the previous
 * one of this instance is still going. Returns a stop function that waits for
 * a run in progress.
 */
export function startExpiryCleanup<DB>(s: CleanupSchedule<DB>): () => Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(run, s.intervalMs * (0.5 + Math.random()));
    timer.unref();
  };
  const run = () => {
    const now = s.now();
    running = runExpiryCleanup(s.database, s.rules, now, s.bounds)
      .then(async (removed) => {
        for (const task of s.tasks ?? []) removed[task.name] = await task.run(now);
        return removed;
      })
      .then((r) => s.onRun(r), (error: unknown) => s.onRun({ error }))
      .finally(() => { running = undefined; schedule(); });
  };
  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
