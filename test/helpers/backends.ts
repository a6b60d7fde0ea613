import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { skipUnless } from './missing-tool.js';

/**
 * The storage backends every integration test runs against. SQLite always;
 * PostgreSQL when reachable at TEST_DATABASE_URL. It is required, and its
 * absence fails the run loudly, under REQUIRE_POSTGRES=1 or on CI (CI=true,
 * as every CI service sets): a CI run must never pass by quietly skipping it.
 */
export type BackendName = 'sqlite' | 'postgres';

export const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A test dependency must be there: asked explicitly (`REQUIRE_<NAME>=1`), or running on CI. */
export function required(name: 'POSTGRES' | 'REDIS', env: Record<string, string | undefined> = process.env): boolean {
  return env[`REQUIRE_${name}`] === '1' || env['CI'] === 'true' || env['CI'] === '1';
}

const pgUp = await postgresReachable();
if (!pgUp && required('POSTGRES')) {
  throw new Error(`PostgreSQL is required (REQUIRE_POSTGRES=1 or CI) but not reachable at ${TEST_DATABASE_URL}`);
}
if (!pgUp) {
  console.warn(`# PostgreSQL not reachable at ${TEST_DATABASE_URL}: running SQLite only`);
  skipUnless([{ tool: 'PostgreSQL', skipped: 'every PostgreSQL variant of the storage and integration tests', install: `apt-get install postgresql, trust auth, database test (or TEST_DATABASE_URL); now ${TEST_DATABASE_URL}` }]);
}

export const BACKENDS: BackendName[] = pgUp ? ['sqlite', 'postgres'] : ['sqlite'];

/** Storage settings for one fresh, isolated database: a new SQLite directory or a new PostgreSQL schema. */
export interface TestStorage {
  backend: BackendName;
  databaseUrl: string | undefined;
  pgSchema: string;
  dataDir: string;
  /** Drops the schema / deletes the directory. */
  cleanup(): Promise<void>;
}

/**
 * `ownDatabase` (PostgreSQL): a new database rather than a schema in the shared one. VACUUM keeps dead rows any
 * open snapshot in the same database may still see, so a test that asserts what VACUUM removed needs a database no
 * concurrently running test file holds a transaction in.
 */
export async function freshStorage(backend: BackendName, opts: { ownDatabase?: boolean } = {}): Promise<TestStorage> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fs-test-'));
  const pgSchema = `t_${randomBytes(6).toString('hex')}`;
  const ownDatabase = backend === 'postgres' && opts.ownDatabase === true;
  const admin = async <T>(fn: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await client.connect();
    try { return await fn(client); } finally { await client.end(); }
  };
  let databaseUrl = backend === 'postgres' ? TEST_DATABASE_URL : undefined;
  if (ownDatabase) {
    await admin((c) => c.query(`CREATE DATABASE "${pgSchema}"`));
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = `/${pgSchema}`;
    databaseUrl = url.toString();
  }
  return {
    backend,
    databaseUrl,
    pgSchema,
    dataDir,
    async cleanup() {
      rmSync(dataDir, { recursive: true, force: true });
      if (ownDatabase) {
        await admin((c) => c.query(`DROP DATABASE IF EXISTS "${pgSchema}" WITH (FORCE)`));
      } else if (backend === 'postgres') {
        await admin(async (client) => {
          // A process the test just killed may still hold locks for a moment; a deadlock with it is retried.
          for (let attempt = 1; ; attempt++) {
            try { await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`); break; } catch (err) {
              if ((err as { code?: string }).code !== '40P01' || attempt === 5) throw err;
            }
          }
        });
      }
    },
  };
}
