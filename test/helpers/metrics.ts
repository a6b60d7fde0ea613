import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before } from 'node:test';
import type { App } from '../../src/core/http/create-app.js';
import type { Database } from '../../src/core/storage/database.js';
import { buildMetricsApp } from '../../src/metrics/app.js';
import { loadMetricsConfig, type MetricsConfig } from '../../src/metrics/config.js';
import { createMetricsDeps, openMetricsDatabase, type MetricsDeps } from '../../src/metrics/deps.js';
import type { MetricsStore } from '../../src/metrics/domain/metrics-store.js';
import type { Report } from '../../src/metrics/domain/report-schema.js';
import { issueToken, type IssuedToken } from '../../src/metrics/domain/tenant-tokens.js';
import { signBody } from '../../src/metrics/domain/verify-signature.js';
import { databaseConn, type SqlConn } from '../../src/metrics/storage/engine/sql-conn.js';
import type { MetricsTables } from '../../src/metrics/storage/tables.js';
import { freshStorage, type BackendName, type TestStorage } from './backends.js';
import { call, listen, type Reply } from './http.js';

/** The metrics service's database on a test's fresh storage, migrated as the service opens it. */
export const openTestMetricsDatabase = (storage: TestStorage) =>
  openMetricsDatabase({ databaseUrl: storage.databaseUrl, dbSchema: storage.pgSchema, dataDir: storage.dataDir });

/**
 * For the engine tests that drive its modules on a connection: registers the
 * enclosing suite's hooks that open a fresh database on `backend` before its
 * tests and close and drop it after; the fields are set once the first hook ran.
 */
export function useEngineDatabase(backend: BackendName): { readonly database: Database<MetricsTables>; readonly conn: SqlConn } {
  const opened = {} as { storage: TestStorage; database: Database<MetricsTables>; conn: SqlConn };
  before(async () => {
    opened.storage = await freshStorage(backend);
    opened.database = await openTestMetricsDatabase(opened.storage);
    opened.conn = databaseConn(opened.database);
  });
  after(async () => {
    await opened.database.close();
    await opened.storage.cleanup();
  });
  return opened;
}

/** A running metrics service on an ephemeral port over fresh storage, plus builders. */
export interface MetricsHarness {
  url: string;
  app: App;
  deps: MetricsDeps;
  config: MetricsConfig;
  storage: TestStorage;
  /** JSON log lines the service wrote (warnings and above unless `logLevel` is overridden). */
  logs: string[];
  /** A new tenant with one token. */
  newTenant(name?: string): Promise<IssuedToken>;
  /** Closes the app, drains the store, drops the storage. */
  close(): Promise<void>;
}

export type MetricsOverrides = Partial<MetricsConfig> & { now?: () => number };

/**
 * Starts the real service (config defaults, then `overrides`) on 127.0.0.1:0
 * against a fresh SQLite directory or PostgreSQL schema. Log lines are
 * captured in `logs`, not printed.
 */
export async function startMetrics(backend: BackendName, overrides: MetricsOverrides = {}): Promise<MetricsHarness> {
  const storage = await freshStorage(backend);
  const { now, ...configOverrides } = overrides;
  const config: MetricsConfig = {
    ...loadMetricsConfig([], {}),
    logLevel: 'warn',
    // In-process tests share the event loop with their client: the loop-delay bound of load shedding would shed the
    // very requests a busy test checks (test/core/load-shedding.test.ts and the overload test exercise it).
    maxEventLoopDelayMs: 0,
    port: 0,
    dataDir: storage.dataDir,
    databaseUrl: storage.databaseUrl,
    dbSchema: storage.pgSchema,
    ...configOverrides,
  };
  const deps = await createMetricsDeps(config, now ? { now } : {});
  const logs: string[] = [];
  const logStream = new Writable({ write(chunk, _enc, cb) { logs.push(String(chunk)); cb(); } });
  const app = await buildMetricsApp(config, deps, { logStream });
  const url = await listen(app);
  return {
    url,
    app,
    deps,
    config,
    storage,
    logs,
    newTenant: (name) => newTenant(deps.store, name),
    async close() {
      await app.close();
      await deps.close();
      await storage.cleanup();
    },
  };
}

/** Creates a tenant with a random name (or `name`) and issues its first token. */
export function newTenant(store: MetricsStore, name = `tenant-${randomBytes(4).toString('hex')}`): Promise<IssuedToken> {
  return issueToken(store, name);
}

/**
 * A valid agent report (28 metrics, like the peers' generator) for `agentId`
 * at `ts` (default: now); any field can be overridden or added.
 */
export function makeReport(overrides: Partial<Report> & Record<string, unknown> = {}): Report {
  return {
    agentId: 'agent-1',
    hostname: 'web-1',
    platform: 'linux',
    ts: Date.now(),
    cpu: { usage: 12.5, perCore: [10, 15, 11, 14, 9, 16, 12, 13], loadAverage: [0.5, 0.4, 0.3] },
    memory: { total: 8_589_934_592, used: 4_294_967_296, free: 4_294_967_296, percent: 50 },
    disks: [
      { path: '/', total: 107_374_182_400, used: 53_687_091_200, available: 53_687_091_200, percent: 50 },
      { path: '/data', total: 1_073_741_824_000, used: 107_374_182_400, available: 966_367_641_600, percent: 10 },
    ],
    network: { rxBytes: 1_000_000, txBytes: 500_000, rxPackets: 1_000, txPackets: 800 },
    services: [],
    alerts: [],
    ...overrides,
  } as Report;
}

/** POSTs a report (object or exact body text) with the token; signs it when `secret` is given. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read loosely shaped JSON bodies
export function ingest(url: string, token: string, report: unknown, opts: { secret?: string; headers?: Record<string, string> } = {}): Promise<Reply<any>> {
  const body = typeof report === 'string' ? report : JSON.stringify(report);
  const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
  if (opts.secret !== undefined) headers['x-collector-signature'] = signBody(opts.secret, body);
  return call(url, 'POST', '/api/v1/ingest', { token, body, headers });
}

/** Reports (objects, or exact line text) as an NDJSON bulk body. */
export function ndjson(reports: unknown[]): string {
  return reports.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';
}

/** POSTs an NDJSON bulk body (text, gzip bytes, or the reports themselves) to /api/v1/ingest/bulk. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read loosely shaped JSON bodies
export function ingestBulk(url: string, token: string, body: string | Buffer | unknown[], headers: Record<string, string> = {}): Promise<Reply<any>> {
  return call(url, 'POST', '/api/v1/ingest/bulk', { token, body: Array.isArray(body) ? ndjson(body) : body, headers: { 'content-type': 'application/x-ndjson', ...headers } });
}
