// Why: the in-process sync benchmarks each start the service on a fresh store and act as one new user with a business.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildSyncApp } from '../../src/sync/app.js';
import { loadSyncConfig, type SyncConfig } from '../../src/sync/config.js';
import { createSyncDeps } from '../../src/sync/deps.js';
import { dropSchema, ensureDatabase } from './postgres.js';
import { jsonRequest } from './json-request.js';

export interface BenchSync {
  url: string;
  email: string;
  password: string;
  token: string;
  userId: string;
  businessId: string;
  /** Stops the service and removes its data directory and schema. */
  close(): Promise<void>;
}

/**
 * The sync service in this process on a loopback port: SQLite in a new data directory, or a new schema of the
 * database `pgUrl` names (created if missing). Rate limits are lifted and password hashing is cheap, so the
 * benchmark measures what it is about; `overrides` tune the rest.
 */
export async function startBenchSync(backend: 'sqlite' | 'postgres', pgUrl: string, overrides: Partial<SyncConfig> = {}): Promise<BenchSync> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sync-bench-'));
  const schema = `bench_sync_${process.pid}`;
  const databaseUrl = backend === 'postgres' ? pgUrl : undefined;
  if (databaseUrl) {
    await ensureDatabase(databaseUrl);
    await dropSchema(databaseUrl, schema);
  }
  const deps = await createSyncDeps({
    ...loadSyncConfig(), dataDir, databaseUrl, dbSchema: schema, logLevel: 'warn', userRateLimit: 1_000_000, ipRateLimit: 1_000_000, scryptLog2N: 10,
    ...overrides,
  });
  const app = await buildSyncApp(deps);
  const close = async () => {
    await app.close();
    await deps.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (databaseUrl) await dropSchema(databaseUrl, schema);
  };
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const addr = app.server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    const url = `http://127.0.0.1:${addr.port}`;
    const email = `bench-${randomUUID()}@example.com`;
    const password = 'bench-password-123';
    const reg = await jsonRequest(url, 'POST', '/api/auth/register', undefined, { email, name: 'Bench', password });
    const token = String(reg['token']);
    const business = await jsonRequest(url, 'POST', '/api/business', token, { name: 'Bench Pty Ltd', abn: '51824753556' });
    return { url, email, password, token, userId: (reg['user'] as { id: string }).id, businessId: String(business['id']), close };
  } catch (e: unknown) {
    await close();
    throw e;
  }
}
