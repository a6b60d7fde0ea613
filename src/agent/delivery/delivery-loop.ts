import type { Logger } from '../logger.js';
import { backoffDelay } from './backoff.js';
import type { BatchOutcome } from './post-batch.js';
import type { Spool, SpoolEntry } from './spool.js';

export interface DeliveryOptions {
  spool: Spool;
  /** Sends reports (oldest first) as one batch. */
  send: (reports: Buffer[], signal: AbortSignal) => Promise<BatchOutcome>;
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

/** What a drain did: reports the service took, refusals (with the service's words), and what is left spooled. */
export interface DrainSummary {
  delivered: number;
  rejected: Array<{ status: number; error: string; details: string }>;
  spooled: number;
  /** Why the last attempt must be retried later, when the drain stopped on a retryable failure. */
  retryReason?: string;
}

/** One attempt at the head of the spool: the delay before the next one (0: go on now), or 'empty'. */
type Attempt = (signal: AbortSignal, stopping: () => boolean) => Promise<number | 'empty'>;

function attempter(opts: DeliveryOptions, summary: DrainSummary): Attempt {
  const { spool, log } = opts;
  let failures = 0;
  // Halved on a 413 (a service with a smaller bulk limit), so the batch that fits is found in a few attempts.
  let maxReports = opts.batchMaxReports;
  const refuse = async (entries: SpoolEntry[], status: number, error: string, details: string) => {
    await spool.removeMany(entries, 'rejected');
    summary.rejected.push({ status, error, details });
    log.error('metrics service refused a report; not retrying it', {
      status, error, details, reports: entries.length, reportTs: entries[0]!.ts, lastReportTs: entries.at(-1)!.ts, rejectedTotal: spool.counters.rejected,
    });
  };
  return async (signal, stopping) => {
    const batch = spool.peekBatch(maxReports, opts.batchMaxBytes);
    if (!batch.length) return 'empty';
    const outcome = await opts.send(await Promise.all(batch.map((e) => spool.read(e))), signal);
    if (outcome.kind === 'retry') {
      summary.retryReason = outcome.reason;
      if (stopping()) return 0;
      failures++;
      const delay = outcome.retryAfterMs ?? backoffDelay(failures, opts.retryBaseMs, opts.retryMaxMs, opts.random);
      // The first failure and then every tenth: a long outage must not flood the journal.
      if (failures === 1 || failures % 10 === 0) {
        log.warn('metrics service unavailable, reports stay spooled', { reason: outcome.reason, status: outcome.status, attempt: failures, retryInMs: delay, spooled: spool.length });
      }
      return Math.max(1, delay);
    }
    delete summary.retryReason;
    if (failures > 0) log.info('metrics service reachable again, sending spooled reports', { afterAttempts: failures, spooled: spool.length });
    failures = 0;
    if (outcome.kind === 'too_large') {
      if (batch.length > 1) {
        maxReports = Math.max(1, Math.floor(batch.length / 2));
        log.warn('metrics service refused a batch as too large, sending smaller ones', { reports: batch.length, nextBatch: maxReports, details: outcome.details });
        return 0;
      }
      await refuse(batch, 413, 'payload_too_large', outcome.details);
      return 0;
    }
    if (outcome.kind === 'rejected') {
      await refuse(batch, outcome.status, outcome.error, outcome.details);
      return 0;
    }
    const delivered = batch.filter((_, i) => outcome.lines[i]!.status !== 'rejected');
    await spool.removeMany(delivered, 'delivered');
    summary.delivered += delivered.length;
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
}

function newSummary(): DrainSummary {
  return { delivered: 0, rejected: [], spooled: 0 };
}

/**
 * Sends what is spooled until the spool is empty or the service asks to wait
 * (the rest stays spooled for the next run). Used by `--once`.
 */
export async function drainSpool(opts: DeliveryOptions): Promise<DrainSummary> {
  const summary = newSummary();
  const attempt = attempter(opts, summary);
  const signal = new AbortController().signal;
  for (;;) {
    const r = await attempt(signal, () => false);
    if (r === 'empty' || r > 0) return { ...summary, spooled: opts.spool.length };
  }
}

/**
 * Sends spooled reports in batches, oldest first. A report leaves the spool
 * only when the service answered for it: stored or duplicate (a batch sent
 * again after a lost answer comes back `duplicate`, so each report is stored
 * exactly once), or refused for good (logged with the service's `details`
 * and counted). Anything else keeps the batch at the head and waits with
 * exponential backoff and full jitter, or the service's Retry-After. Runs
 * apart from collection, which only appends to the spool.
 */
export function startDeliveryLoop(opts: DeliveryOptions): DeliveryLoop {
  const attempt = attempter(opts, newSummary());
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
        next = await attempt(inFlight.signal, () => stopping);
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
    },
  };
}
