import type { RateLimiter, RateLimitResult } from './rate-limiter.js';

interface Window { count: number; resetAt: number }

/** Single-process limiter; expired windows are swept so memory stays bounded by active keys. */
export function createMemoryRateLimiter(now: () => number = Date.now): RateLimiter {
  const windows = new Map<string, Window>();
  const sweep = setInterval(() => {
    const t = now();
    for (const [k, w] of windows) if (w.resetAt <= t) windows.delete(k);
  }, 30_000);
  sweep.unref();

  function current(key: string, windowMs: number): Window {
    const t = now();
    let w = windows.get(key);
    if (!w || w.resetAt <= t) {
      w = { count: 0, resetAt: t + windowMs };
      windows.set(key, w);
    }
    return w;
  }

  return {
    async hit(key, limit, windowMs): Promise<RateLimitResult> {
      const w = current(key, windowMs);
      w.count += 1;
      return { allowed: w.count <= limit, count: w.count, retryAfterMs: Math.max(0, w.resetAt - now()) };
    },
    async inspect(key) {
      const w = windows.get(key);
      const left = w ? w.resetAt - now() : 0;
      return left > 0 && w ? { count: w.count, retryAfterMs: left } : { count: 0, retryAfterMs: 0 };
    },
    async reset(key) {
      windows.delete(key);
    },
    async close() {
      clearInterval(sweep);
      windows.clear();
    },
  };
}
