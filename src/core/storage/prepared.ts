// Why: PostgreSQL parses and plans every unnamed statement; the hot paths' fixed SQL texts run as named (prepared) statements instead, parsed once per connection.
import type pg from 'pg';

const names = new Map<string, string>();

/**
 * Marks a constant SQL text to run as a named statement on PostgreSQL, and
 * returns it. Only for the few texts of hot paths: each one stays prepared on
 * every pooled connection that ran it.
 */
export function prepared(text: string): string {
  if (!names.has(text)) names.set(text, `fleetsync_${names.size + 1}`);
  return text;
}

/**
 * Makes a pooled client run marked texts as named statements. Kysely calls
 * `client.query(text, values)`; a marked text becomes `{ name, text, values }`,
 * which pg prepares on the connection's first use and then only binds.
 */
export function nameMarkedStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((config: unknown, values?: unknown, callback?: unknown) => {
    const name = typeof config === 'string' && (values === undefined || Array.isArray(values)) ? names.get(config) : undefined;
    return name ? query({ name, text: config, values }, callback) : query(config, values, callback);
  }) as typeof client.query;
}
