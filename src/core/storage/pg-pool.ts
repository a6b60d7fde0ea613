// Why: a service's PostgreSQL pool is made one way, by the service and by its writer threads, which must not load the query builder to get it.
import pg from 'pg';
import { SCHEMA_NAME } from '../config.js';
import { writeLogLine } from '../log-line.js';
import { nameMarkedStatements } from './prepared.js';

/** The schema name goes into `search_path` and DDL unquoted-safe only if it is a plain identifier. */
export function assertSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid PostgreSQL schema name "${schema}"`);
}

/** How long a request waits for a PostgreSQL connection, a new one or a free one of the pool. */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * A pool on `schema` (search_path), with bigint columns read as numbers and marked statements run as named ones.
 * A connection the server closes (a restart, a failover, `pg_terminate_backend`, `idle_session_timeout`) is an
 * `error` event on its client and, when idle, on the pool: unheard, either would end the process. Here an idle one
 * is logged and dropped by the pool, which opens a new connection when next needed; a checked-out one fails its
 * query in flight or its next one, whose caller sees the error and releases the client to be dropped. `service` names
 * the service in that log line.
 */
export function createPgPool(url: string, schema: string, max: number, service?: string): pg.Pool {
  assertSchemaName(schema);
  const pool = new pg.Pool({
    connectionString: url,
    max,
    // A connection the pool cannot open (or hand out) within this fails its request as unreachable (a 503), rather
    // than holding it for the OS's TCP timeout, minutes against an address that drops packets.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    options: `-c search_path=${schema}`,
    types: { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser },
  });
  pool.on('error', (err) => writeLogLine('warn', service, 'PostgreSQL closed an idle connection; a new one is opened when needed', err));
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    nameMarkedStatements(client);
  });
  return pool;
}
