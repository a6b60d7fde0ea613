/**
 * Exponential backoff with full jitter (AWS Architecture Blog, "Exponential
 * Backoff and Jitter"): a uniform random delay in [0, min(max, base * 2^(attempt-1))].
 * Full jitter spreads a fleet of agents that all lost the service at once, so
 * they do not return in lockstep and knock it over again.
 */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 30)));
  return Math.floor(random() * ceiling);
}

/** Longest wait a `Retry-After` may impose; a misconfigured proxy must not park the agent for days. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/** `Retry-After` as delta-seconds or an HTTP date, in milliseconds from `now`; `undefined` when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const v = value.trim();
  let ms: number;
  if (/^\d+$/.test(v)) ms = Number(v) * 1000;
  else {
    const at = Date.parse(v);
    if (Number.isNaN(at)) return undefined;
    ms = at - now;
  }
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}
