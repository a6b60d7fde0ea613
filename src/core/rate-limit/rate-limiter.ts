/**
 * Counts hits per key in fixed windows, or in sliding ones (`hitSliding`).
 * Implementations: in-process memory (one instance) and Redis (shared by
 * every instance, one atomic script per hit).
 */
export interface RateLimiter {
  /**
   * Records one hit for `key` in the current window of `windowMs` and says
   * whether it is within `limit`. `retryAfterMs` is the time until the window
   * resets (meaningful when not allowed).
   */
  hit(key: string, limit: number, windowMs: number): Promise<RateLimitResult>;
  /**
   * Records one hit for `key` and counts the hits of the last `windowMs`
   * (a sliding log, not a fixed window: no window boundary lets a second
   * `limit` of hits through right after the first). Allowed while that count
   * is within `limit`; `retryAfterMs` is the time until the oldest counted
   * hit leaves the window. Only the newest `limit + 1` hits are kept, so the
   * count stops there. Lockouts use it; request rate limits keep `hit`.
   */
  hitSliding(key: string, limit: number, windowMs: number): Promise<RateLimitResult>;
  /**
   * The current window of `key` without recording a hit: its count and the
   * time until it resets; `{ count: 0, retryAfterMs: 0 }` when no window is
   * open. Lockouts use it to refuse with the time the lock has left without
   * ever starting or extending a window.
   */
  inspect(key: string): Promise<WindowState>;
  /** Forgets `key` (for example after a successful login). */
  reset(key: string): Promise<void>;
  close(): Promise<void>;
}

export interface WindowState {
  count: number;
  retryAfterMs: number;
}

export interface RateLimitResult {
  allowed: boolean;
  count: number;
  retryAfterMs: number;
}
