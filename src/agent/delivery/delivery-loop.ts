import type { Logger } from '../logger.js';
import { backoffDelay } from './backoff.js';
import { encodeBatch, type EncodedBatch } from './encode-batch.js';
import type { BatchOutcome } from './post-batch.js';
import type { Spool, SpoolEntry } from './spool.js';

export interface DeliveryOptions {
  spool: Spool;
  /** Sends one encoded batch (`sendBatch`): its reports, oldest first, as one request. */
  send: (batch: EncodedBatch, signal: AbortSignal) => Promise<BatchOutcome>;
  log: Logger;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Most reports in one batch (the service takes at most 10,000). */
  batchMaxReports: number;
  /** Bound on a batch's uncompressed bytes (the service's bulk limit is 32 MiB by default). */
  batchMaxBytes: number;
  random?: () => number;
}

export interface DeliveryLoop {
  /** Wakes the loop after an append (it otherwise sleeps while the spool is empty). */
  notify(): void;
  /** Stops after the request in flight, or aborts it after `graceMs`; whatever is unsent stays spooled. */
  stop(graceMs: number): Promise<void>;
}

/**
 * What a drain did: reports the service took, its refusals (with its words), spooled reports dropped unsent because
 * their file was gone or damaged (the service never saw them), and what is left spooled.
 */
export interface DrainSummary {
  delivered: number;
  rejected: Array<{ status: number; error: string; details: string }>;
  unsendable: string[];
  spooled: number;
  /** Why the last attempt must be retried later, when the drain stopped on a retryable failure. */
  retryReason?: string;
}

/** One attempt at the head of the spool: the delay before the next one (0: go on now), or 'empty'. */
interface Attempter {
  attempt(signal: AbortSignal, stopping: () => boolean): Promise<number | 'empty'>;
  /** Waits for the batch being prepared ahead (if any) and for the unlinks of delivered reports. */
  settle(): Promise<void>;
}

/** A batch read from the spool and compressed, ready to send. */
interface Prepared {
  entries: SpoolEntry[];
  batch: EncodedBatch;
}

/**
 * Full batches answered in a row, after a timeout halved them, before they double again: trying the larger size too
 * soon would time out again, and each timeout costs the whole request timeout.
 */
const TIMELY_TO_GROW = 8;

/** `summary`: what `--once` reports; the running agent keeps none (it would grow with every refusal for good). */
function attempter(opts: DeliveryOptions, summary?: DrainSummary): Attempter {
  const { spool, log } = opts;
  let failures = 0;
  // Halved on a 413 (a service with a smaller bulk limit), so the batch that fits is found in a few attempts; that
  // limit is the service's configuration, so it stays.
  let fitting = opts.batchMaxReports;
  // Halved when a batch gets no answer in time (a slow uplink, a busy service), so a backlog still moves; doubled
  // again after TIMELY_TO_GROW full batches answered in a row, so one slow moment does not shrink batches for good.
  let timely = opts.batchMaxReports;
  let answeredInRow = 0;
  const maxReports = () => Math.min(fitting, timely);
  /** The batch after the one in flight, read and compressed meanwhile; a failure is kept as a value, never unhandled. */
  let ahead: Promise<Prepared | { failed: unknown }> | undefined;
  /**
   * Reads and compresses `entries`. Those that can never be sent (their file gone, blank or damaged) leave the spool
   * as rejected, logged, so they do not hold every later report up; the batch is what is left (none: undefined).
   */
  const prepare = async (entries: SpoolEntry[]): Promise<Prepared | undefined> => {
    const read: SpoolEntry[] = [];
    const unsendable: Array<{ entry: SpoolEntry; why: string }> = [];
    const batch = await encodeBatch(spool.readMany(entries, read, unsendable));
    for (const { entry, why } of unsendable) {
      await spool.removeMany([entry], 'rejected');
      summary?.unsendable.push(`spooled report ${entry.seq}: ${why}`);
      log.error('a spooled report cannot be sent (its file was removed or damaged); dropped from the spool', { seq: entry.seq, reportTs: entry.ts, why, rejectedTotal: spool.counters.rejected });
    }
    return read.length ? { entries: read, batch } : undefined;
  };
  const prepareAhead = (inFlight: SpoolEntry[]) => {
    const next = spool.peekBatch(maxReports(), opts.batchMaxBytes, inFlight.length);
    ahead = next.length ? prepare(next).then((p) => p ?? { failed: undefined }, (failed: unknown) => ({ failed })) : undefined;
  };
  /**
   * The batch to send now: the one prepared ahead if it still starts at the head of the spool (the batch before it
   * was answered, nothing was dropped by a bound, no 413 or timeout shrank the batches), else the head read afresh.
   */
  const next = async (): Promise<Prepared | undefined> => {
    const early = ahead && (await ahead);
    ahead = undefined;
    if (early && 'entries' in early && early.entries[0] === spool.peek() && early.entries.length <= maxReports()) return early;
    // A batch of nothing but unsendable reports: they are gone, try the next ones.
    for (;;) {
      const entries = spool.peekBatch(maxReports(), opts.batchMaxBytes);
      if (!entries.length) return undefined;
      const prepared = await prepare(entries);
      if (prepared) return prepared;
    }
  };
  const refuse = async (entries: SpoolEntry[], status: number, error: string, details: string) => {
    await spool.removeMany(entries, 'rejected');
    summary?.rejected.push({ status, error, details });
    log.error('metrics service refused a report; not retrying it', {
      status, error, details, reports: entries.length, reportTs: entries[0]!.ts, lastReportTs: entries.at(-1)!.ts, rejectedTotal: spool.counters.rejected,
    });
  };
  const attempt = async (signal: AbortSignal, stopping: () => boolean): Promise<number | 'empty'> => {
    const prepared = await next();
    if (!prepared) return 'empty';
    const { entries: batch } = prepared;
    // Only one request is ever in flight, so the service stores (and routes the alerts of) reports in spool order;
    // reading and compressing the next batch is what overlaps with it (not while the service keeps failing: the
    // head would only be sent again).
    if (failures === 0) prepareAhead(batch);
    const outcome = await opts.send(prepared.batch, signal);
    if (outcome.kind === 'retry') {
      if (summary) summary.retryReason = outcome.reason;
      if (stopping()) return 0;
      answeredInRow = 0;
      // Sent again unchanged, a batch too big for the link would time out for ever. The attempt already waited the
      // timeout, so the smaller one goes at once, as after a 413; a single report left waits the backoff.
      if (outcome.timedOut && batch.length > 1) {
        timely = Math.max(1, Math.floor(batch.length / 2));
        log.warn('metrics service gave no answer in time for a batch, sending smaller ones', { reason: outcome.reason, reports: batch.length, nextBatch: timely, spooled: spool.length });
        return 0;
      }
      failures++;
      // The service's Retry-After only lengthens the wait: `0`, or a date already past on a skewed clock, must not
      // turn the backoff into a retry every millisecond.
      const delay = Math.max(outcome.retryAfterMs ?? 0, backoffDelay(failures, opts.retryBaseMs, opts.retryMaxMs, opts.random));
      // The first failure and then every tenth: a long outage must not flood the journal.
      if (failures === 1 || failures % 10 === 0) {
        log.warn('metrics service unavailable, reports stay spooled', { reason: outcome.reason, status: outcome.status, attempt: failures, retryInMs: delay, spooled: spool.length });
      }
      return Math.max(1, delay);
    }
    delete summary?.retryReason;
    if (failures > 0) log.info('metrics service reachable again, sending spooled reports', { afterAttempts: failures, spooled: spool.length });
    failures = 0;
    if (outcome.kind === 'too_large') {
      if (batch.length > 1) {
        fitting = Math.max(1, Math.floor(batch.length / 2));
        log.warn('metrics service refused a batch as too large, sending smaller ones', { reports: batch.length, nextBatch: fitting, details: outcome.details });
        return 0;
      }
      await refuse(batch, 413, 'payload_too_large', outcome.details);
      return 0;
    }
    if (outcome.kind === 'rejected') {
      await refuse(batch, outcome.status, outcome.error, outcome.details);
      return 0;
    }
    if (timely < opts.batchMaxReports && batch.length >= timely && ++answeredInRow >= TIMELY_TO_GROW) {
      timely = Math.min(opts.batchMaxReports, timely * 2);
      answeredInRow = 0;
    }
    const delivered = batch.filter((_, i) => outcome.lines[i]!.status !== 'rejected');
    await spool.removeMany(delivered, 'delivered');
    if (summary) summary.delivered += delivered.length;
    for (const [i, line] of outcome.lines.entries()) {
      const entry = batch[i]!;
      if (line.status === 'rejected') await refuse([entry], 422, line.error ?? 'rejected', line.details ?? '');
      else log.debug('report delivered', { reportTs: entry.ts, status: line.status });
      if (line.status === 'stored' && Array.isArray(line.alertResults) && line.alertResults.some((a: { outcome?: string }) => a?.outcome === 'failed')) {
        log.warn('report stored but routing of some alerts failed', { alertResults: line.alertResults, reportTs: entry.ts });
      }
    }
    return 0;
  };
  return {
    attempt,
    async settle() {
      await ahead;
      ahead = undefined;
      await spool.settled();
    },
  };
}

function newSummary(): DrainSummary {
  return { delivered: 0, rejected: [], unsendable: [], spooled: 0 };
}

/**
 * Sends what is spooled until the spool is empty or the service asks to wait
 * (the rest stays spooled for the next run). Used by `--once`.
 */
export async function drainSpool(opts: DeliveryOptions): Promise<DrainSummary> {
  const summary = newSummary();
  const sender = attempter(opts, summary);
  const signal = new AbortController().signal;
  try {
    for (;;) {
      const r = await sender.attempt(signal, () => false);
      if (r === 'empty' || r > 0) return { ...summary, spooled: opts.spool.length };
    }
  } finally {
    await sender.settle();
  }
}

/**
 * Sends spooled reports in batches, oldest first. A report leaves the spool
 * only when the service answered for it: stored or duplicate (a batch sent
 * again after a lost answer comes back `duplicate`, so each report is stored
 * exactly once), or refused for good (logged with the service's `details`
 * and counted). Anything else keeps the batch at the head and waits with
 * exponential backoff and full jitter, or the service's Retry-After if longer. Runs
 * apart from collection, which only appends to the spool.
 */
export function startDeliveryLoop(opts: DeliveryOptions): DeliveryLoop {
  const sender = attempter(opts);
  let stopping = false;
  let wake: (() => void) | undefined;
  /** Set by `notify` so an append racing with the "spool is empty" check is not missed. */
  let appended = false;
  let idle = false;
  const inFlight = new AbortController();

  // Waiting for an append (ms undefined) ends on notify; a backoff wait ends only on its timer or stop, so a
  // stream of new reports cannot hammer a service that is down.
  const sleep = (ms: number | undefined) => new Promise<void>((resolve) => {
    idle = ms === undefined;
    if (idle && appended) { appended = false; idle = false; resolve(); return; }
    const timer = ms === undefined ? undefined : setTimeout(() => { wake = undefined; resolve(); }, ms);
    wake = () => { if (timer) clearTimeout(timer); wake = undefined; idle = false; resolve(); };
  });

  const running = (async () => {
    while (!stopping) {
      let next: number | 'empty';
      appended = false;
      try {
        next = await sender.attempt(inFlight.signal, () => stopping);
      } catch (e: unknown) {
        // Disk trouble reading or removing a spool file: keep the report, try again later.
        opts.log.error('spool error during delivery', { error: String(e) });
        next = opts.retryMaxMs;
      }
      if (stopping) break;
      if (next === 'empty') await sleep(undefined);
      else if (next > 0) await sleep(next);
    }
  })();

  return {
    notify() {
      appended = true;
      if (idle) { appended = false; wake?.(); }
    },
    async stop(graceMs) {
      stopping = true;
      wake?.();
      const timer = setTimeout(() => inFlight.abort(), graceMs);
      try { await running; } finally { clearTimeout(timer); }
      await sender.settle();
    },
  };
}
