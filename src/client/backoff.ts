// Why: reconnects and retries spread out (exponential) and de-synchronised (jitter), so a restarted server is not hit by every client at once.

export interface BackoffOptions {
  /** First delay (default 500 ms). */
  baseMs?: number;
  /** Largest delay (default 30 s). */
  maxMs?: number;
}

/** Delay before attempt `attempt` (0-based): half of the exponential step plus a random part of the other half ("equal jitter"). */
export function backoffDelay(attempt: number, o: BackoffOptions = {}, random: () => number = Math.random): number {
  const step = Math.min(o.maxMs ?? 30_000, (o.baseMs ?? 500) * 2 ** Math.min(attempt, 30));
  return step / 2 + random() * (step / 2);
}
