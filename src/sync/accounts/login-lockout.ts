import { createHash } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import type { AccountsContext } from './accounts-context.js';

/**
 * Login lockout on the shared `RateLimiter`, keyed by the e-mail as typed
 * (normalized), whether or not an account has it, so a lock says nothing about
 * which accounts exist. Failures are counted in a window as long as the lock;
 * the failure that reaches the threshold starts a lock lasting the full lock
 * period from that moment. While locked, attempts are refused before the
 * password is looked at, so the right password does not get in either; they
 * do not extend the lock. Keys carry a hash, not the address, because they
 * may live in a shared Redis.
 */
function keys(email: string) {
  const id = createHash('sha256').update(email).digest('hex').slice(0, 32);
  return { failures: `sync:login-failures:${id}`, lock: `sync:login-lock:${id}` };
}

/** 429 with the time the lock has left when `email` is locked. */
export async function assertNotLocked(ctx: AccountsContext, email: string): Promise<void> {
  const w = await ctx.rateLimiter.inspect(keys(email).lock);
  if (w.count > 0) {
    throw new AppError('rate_limited', 'too many failed logins for this e-mail address; try again later', { retry_after: Math.max(1, Math.ceil(w.retryAfterMs / 1000)) });
  }
}

export async function recordLoginFailure(ctx: AccountsContext, email: string): Promise<void> {
  const k = keys(email);
  const periodMs = ctx.config.lockoutSeconds * 1000;
  const r = await ctx.rateLimiter.hit(k.failures, ctx.config.lockoutThreshold, periodMs);
  if (r.count >= ctx.config.lockoutThreshold) {
    await ctx.rateLimiter.reset(k.lock);
    await ctx.rateLimiter.hit(k.lock, 1, periodMs);
    await ctx.rateLimiter.reset(k.failures);
  }
}

export async function clearLoginFailures(ctx: AccountsContext, email: string): Promise<void> {
  await ctx.rateLimiter.reset(keys(email).failures);
}
