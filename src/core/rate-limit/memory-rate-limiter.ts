import type { RateLimiter, RateLimitResult } from './rate-limiter.js';

interface Window { count: number; resetAt: number }
interface Log { hits: number[]; windowMs: number }

/** Single-process limiter; expired windows and logs are swept so memory stays bounded by active keys. */
export function createMemoryRateLimiter(now: () => number = Date.now): RateLimiter {
  const windows = new Map<string, Window>();
  const logs = new Map<string, Log>();
  const sweep = setInterval(() => {
    const t = now();
    for (const [k, w] of windows) if (w.resetAt <= t) windows.delete(k);
    for (const [k, l] of logs) if (l.hits.at(-1)! <= t - l.windowMs) logs.delete(k);
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
    async hitSliding(key, limit, windowMs): Promise<RateLimitResult> {
      const t = now();
      let log = logs.get(key);
      if (!log) logs.set(key, (log = { hits: [], windowMs }));
      log.windowMs = windowMs;
      const { hits } = log;
      let expired = 0;
      while (expired < hits.length && hits[expired]! <= t - windowMs) expired++;
      hits.splice(0, Math.max(expired, hits.length + 1 - (limit + 1)));
      hits.push(t);
      return { allowed: hits.length <= limit, count: hits.length, retryAfterMs: Math.max(0, hits[0]! + windowMs - t) };
    },
    async inspect(key) {
      const w = windows.get(key);
      const left = w ? w.resetAt - now() : 0;
      return left > 0 && w ? { count: w.count, retryAfterMs: left } : { count: 0, retryAfterMs: 0 };
    },
    async reset(key) {
      windows.delete(key);
      logs.delete(key);
    },
    async close() {
      clearInterval(sweep);
      windows.clear();
      logs.clear();
    },
  };
}
