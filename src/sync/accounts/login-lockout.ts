import { createHash } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import type { AccountsContext } from './accounts-context.js';

/**
 * Login lockout on the shared `RateLimiter`, keyed by the e-mail as typed
 * (normalized), whether or not an account has it, so a lock says nothing about
 * which accounts exist. Keys carry a hash, not the address, because they may
 * live in a shared Redis.
 *
 * Every attempt is counted, atomically (one `hitSliding`: a Redis script, or
 * one synchronous step in memory), BEFORE its password is checked, among the
 * attempts of the last lock period: a sliding window, so no window boundary
 * lets a second `threshold` of guesses through right after the first (a fixed
 * window let 7 wrong passwords be checked within a second across its end). So
 * a burst of parallel guesses gets no more than `threshold` password checks in
 * any lock period, on one instance or across instances; the rest are refused at once.
 * The attempt that reaches the threshold and fails starts the lock, lasting
 * the full lock period from that moment. While locked, attempts are refused
 * before the password is looked at (the right password does not get in
 * either) and are not counted, so they do not extend the lock.
 */
function keys(email: string) {
  const id = createHash('sha256').update(email).digest('hex').slice(0, 32);
  return { attempts: `sync:login-attempts:${id}`, lock: `sync:login-lock:${id}`, successes: `sync:login-successes:${id}` };
}

function locked(retryAfterMs: number): AppError {
  return new AppError('rate_limited', 'too many failed logins for this e-mail address; try again later', { retry_after: Math.max(1, Math.ceil(retryAfterMs / 1000)) });
}

/**
 * Seconds an attempt beyond the threshold is told to wait while no lock is set
 * yet: the attempts in flight settle within about that (a success frees the
 * address, a last failure locks it and the next answer gives the lock's time).
 */
const IN_FLIGHT_RETRY_SECONDS = 1;

/** One counted login attempt; settle it with `loginFailed` or `loginSucceeded` once the password is checked. */
export interface LoginAttempt {
  email: string;
  /** This attempt is the threshold-th of the window: if it fails, the address locks. */
  last: boolean;
  /** Successes of the address when it was counted: one since began a new run, which this attempt does not end. */
  successes: number;
}

/**
 * Counts a login attempt for `email` before any password work: 429 with the
 * time left while the address is locked, and 429 for an attempt beyond the
 * threshold (a parallel burst, racing the attempt that is about to lock it).
 */
export async function countLoginAttempt(ctx: AccountsContext, email: string): Promise<LoginAttempt> {
  const k = keys(email);
  const [lock, successes] = await Promise.all([ctx.rateLimiter.inspect(k.lock), ctx.rateLimiter.inspect(k.successes)]);
  if (lock.count > 0) throw locked(lock.retryAfterMs);
  const periodMs = ctx.config.lockoutSeconds * 1000;
  const r = await ctx.rateLimiter.hitSliding(k.attempts, ctx.config.lockoutThreshold, periodMs);
  // Refused without a password check: as many attempts as the threshold allows are already being checked.
  if (!r.allowed) {
    throw new AppError('rate_limited', 'too many login attempts for this e-mail address at once; try again later', { retry_after: IN_FLIGHT_RETRY_SECONDS });
  }
  return { email, last: r.count >= ctx.config.lockoutThreshold, successes: successes.count };
}

/**
 * The attempt's password was wrong: the threshold-th failure locks the address for the full period. The attempt
 * count is left as it is: an attempt that found no lock just before this sets it is counted just after, and must
 * find the count past the threshold (reset here, it started a new count and had its password checked). The count's
 * window began before the lock, so it ends before the lock does.
 */
export async function loginFailed(ctx: AccountsContext, attempt: LoginAttempt): Promise<void> {
  if (!attempt.last) return;
  const k = keys(attempt.email);
  // A login that succeeded after this attempt was counted (its password checked first) reset the count: the failures
  // counted before it are of the old run, and do not make the threshold of the new one.
  if ((await ctx.rateLimiter.inspect(k.successes)).count !== attempt.successes) return;
  await ctx.rateLimiter.reset(k.lock);
  await ctx.rateLimiter.hit(k.lock, 1, ctx.config.lockoutSeconds * 1000);
}

/** A successful login clears the count, and says so to the attempts counted before it (see `loginFailed`). */
export async function loginSucceeded(ctx: AccountsContext, attempt: LoginAttempt): Promise<void> {
  const k = keys(attempt.email);
  await ctx.rateLimiter.reset(k.attempts);
  await ctx.rateLimiter.hit(k.successes, Number.MAX_SAFE_INTEGER, ctx.config.lockoutSeconds * 1000);
}
