// Why: benchmarks on PostgreSQL use a database of their own and report its backends' CPU, which the service's process figures leave out.
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

/** CPU seconds so far of the PostgreSQL backends serving database `db` (process title `postgres: user db ...`), from /proc. */
export function pgCpu(db: string): number {
  const tick = 100;
  let total = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.startsWith('postgres: ') || !cmd.split(' ').includes(db)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) / tick;
    } catch { /* gone */ }
  }
  return total;
}

/** Creates the database `url` names unless it exists. */
export async function ensureDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  const name = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.href });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } catch (e: unknown) {
    if ((e as { code?: string }).code !== '42P04') throw e;
  } finally {
    await client.end();
  }
}

/**
 * Runs `fn` on a fresh schema of the database at `url`, with a connection for watching it, and drops the schema
 * afterwards. `fn` gets that connection and the environment that points a service at the database.
 */
export async function onFreshSchema<T>(url: string, schema: string, fn: (admin: pg.Client, env: NodeJS.ProcessEnv) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    return await fn(admin, { ...process.env, DATABASE_URL: url });
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

/** Drops `schema` of the database at `url`, if it is there: a benchmark's fresh start and its cleanup. */
export async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try { await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`); } finally { await client.end(); }
}
