// Why: a service's PostgreSQL pool is made one way, by the service and by its writer threads, which must not load the query builder to get it.
import pg from 'pg';
import { nameMarkedStatements } from './prepared.js';

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The schema name goes into `search_path` and DDL unquoted-safe only if it is a plain identifier. */
export function assertSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema)) throw new Error(`invalid PostgreSQL schema name "${schema}"`);
}

/** A pool on `schema` (search_path), with bigint columns read as numbers and marked statements run as named ones. */
export function createPgPool(url: string, schema: string, max: number): pg.Pool {
  assertSchemaName(schema);
  const pool = new pg.Pool({
    connectionString: url,
    max,
    options: `-c search_path=${schema}`,
    types: { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser },
  });
  pool.on('connect', nameMarkedStatements);
  return pool;
}
