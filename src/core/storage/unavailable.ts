// Why: a database that cannot be reached is a 503 the client may retry, not a 500; the drivers say so in several ways.
import { AppError } from '../errors.js';

/**
 * How a database failure left a request: `unreachable`, the database was never reached (nothing of the request
 * happened); `lost`, the connection broke while the request ran (a write may or may not have committed).
 */
export type DatabaseFailure = 'unreachable' | 'lost';

/** Failing to open a connection, or the server refusing one (Node system error codes and SQLSTATEs). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  // 08001/08004: cannot establish / rejected; 57P03: cannot connect now (starting up); 53300: too many connections.
  '08001', '08004', '57P03', '53300',
  // Another process holds SQLite's write lock past the busy timeout: the statement did not run.
  'SQLITE_BUSY',
]);

/** A connection that broke under a query: the socket, or the server shutting down or crashing (class 08, 57P01, 57P02). */
const LOST = { codes: new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT']), states: /^(08...|57P0[12])$/ };

/** pg's own messages (they carry no code): a pool that could not connect in time; a connection that went away. */
// The second: pg-pool's connectionTimeoutMillis fired while a new connection was still being opened.
const PG_UNREACHABLE = /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout)/;
// "Not queryable" is also what the ROLLBACK after a lost COMMIT meets, and that error is the one the caller sees.
const PG_LOST = /^(Connection terminated|Client has encountered a connection error)/;

/** Whether `err` is the database being unreachable or going away rather than the request being wrong, and how. */
export function databaseFailure(err: unknown): DatabaseFailure | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (UNREACHABLE_CODES.has(code)) return 'unreachable';
    if (LOST.codes.has(code) || LOST.states.test(code)) return 'lost';
  }
  if (typeof message === 'string') {
    if (PG_UNREACHABLE.test(message)) return 'unreachable';
    if (PG_LOST.test(message)) return 'lost';
  }
  return undefined;
}

/**
 * The storage the database (or the attachment directory) writes to is full: SQLite's SQLITE_FULL, PostgreSQL's
 * disk_full (53100), ENOSPC or a quota (EDQUOT) under a file write. The write failed whole (its transaction rolled back,
 * a staged file removed), so nothing of the request happened, and the same request succeeds once space is freed.
 */
const STORAGE_FULL_CODES = new Set(['SQLITE_FULL', '53100', 'ENOSPC', 'EDQUOT']);

export function isStorageFull(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const { code } = err as { code?: unknown };
  return typeof code === 'string' && STORAGE_FULL_CODES.has(code);
}

/** `Retry-After` of the 503 a write gets while the server's storage is full: freeing space is an operator's minutes, not seconds. */
export const STORAGE_FULL_RETRY_AFTER_S = 30;
const STORAGE_FULL_DETAILS = "the server's storage is full; nothing was stored, retry later";

/** The 503 of a write refused for want of space: the disk filled, or free space is under the guard's floor. */
export function storageFullError(): AppError {
  return new AppError('unavailable', STORAGE_FULL_DETAILS, { retry_after: STORAGE_FULL_RETRY_AFTER_S });
}
