// Why: a database that cannot be reached is a 503 the client may retry, not a 500; the drivers say so in several ways.

/** Socket-level failures to reach or keep a connection (Node system error codes, as pg passes them on). */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * PostgreSQL SQLSTATEs of a server that is going away or not taking connections: class 08 (connection exception),
 * 57P01-57P03 (admin or crash shutdown, cannot connect now), 53300 (too many connections).
 */
const PG_STATES = /^(08...|57P0[123]|53300)$/;

/** pg's own messages for a connection lost or never made (they carry no code). */
const PG_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

/**
 * Whether `err` says the database is unreachable or refusing work for now (PostgreSQL down, restarting, out of
 * connections; SQLite locked past its busy timeout by another process), rather than that the request was wrong.
 */
export function databaseUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || PG_STATES.test(code) || code === 'SQLITE_BUSY')) return true;
  return typeof message === 'string' && PG_MESSAGES.test(message);
}
