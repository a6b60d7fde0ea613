// Why: one error type for the client, carrying the server's `error` code so apps branch on codes, not on messages.
import type { ErrorCode } from '../core/errors.js';

/**
 * Codes a `SyncClientError` can carry: the server's codes (docs/sync-api.md,
 * "Errors") and the client's own:
 * - `store_in_use`: another client (tab, process) holds the local store;
 * - `local_store`: the local store failed a read or write (the device's storage full, an IndexedDB quota, a SQLite
 *   error); `cause` is the store's error, and nothing of the call was kept;
 * - `network`: no answer (offline, connection reset, server gone);
 * - `session_expired`: refresh failed, the user must sign in again;
 * - `not_signed_in`: a call that needs a session was made without one;
 * - `rejected`: the server rejected a pushed item (stale or invalid), `details` says why;
 * - `integrity`: downloaded bytes do not match the attachment's size or SHA-256;
 * - `closed`: the client was closed (`close()`): the call was cut short by it, or made after it.
 */
export type SyncErrorCode = ErrorCode | 'network' | 'session_expired' | 'not_signed_in' | 'rejected' | 'integrity' | 'store_in_use' | 'local_store' | 'closed';

export class SyncClientError extends Error {
  readonly code: SyncErrorCode;
  /** HTTP status when the server answered; undefined for client-side failures. */
  readonly status: number | undefined;
  readonly details: string | undefined;
  /** Seconds the server asked to wait (429). */
  readonly retryAfter: number | undefined;

  constructor(code: SyncErrorCode, message: string, init: { status?: number; details?: string; retryAfter?: number; cause?: unknown } = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'SyncClientError';
    this.code = code;
    this.status = init.status;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }
}

/** The error a store's `claim` rejects with when another client holds it. */
export function storeInUse(what: string): SyncClientError {
  return new SyncClientError('store_in_use', `${what} is open in another client (another tab or process): one client per store at a time`);
}

/**
 * True for failures worth retrying later with the same request: no answer, the server briefly unavailable, or the local
 * store failing (space may be freed).
 */
export function isTransient(e: unknown): boolean {
  return e instanceof SyncClientError && (e.code === 'network' || e.code === 'unavailable' || e.code === 'internal' || e.code === 'local_store');
}

/**
 * Failures the client's own retries try again later (a background round, an attachment transfer): what isTransient
 * says, and the server asking for time (a 429 past the waits a call makes itself, a 408 for a body that came too
 * slowly). Others wait for the app (a write, a call) or the next feed message or safety pull.
 */
export function retriedLater(e: unknown): boolean {
  return isTransient(e) || (e instanceof SyncClientError && (e.code === 'rate_limited' || e.code === 'request_timeout'));
}
