import { AppError } from '../../core/errors.js';
import type { Database } from '../../core/storage/database.js';
import { chunks } from '../../core/storage/chunks.js';
import type { MetricLimits, MetricsStore, Tenant, TokenInfo } from '../domain/metrics-store.js';
import { AGENT_ID_PATTERN } from '../domain/report-text.js';
import { DEFAULT_WRITER_OPTIONS, type WriterOptions } from './engine/engine-writer.js';
import { createFoldPool, defaultFoldThreads } from './engine/fold-pool.js';
import { latestByHost } from './engine/latest.js';
import { TailRows } from './engine/tail-rows.js';
import { aggregatePointsLimit, readAggregate, readHost, stableRead } from './engine/reader.js';
import { databaseConn } from './engine/sql-conn.js';
import { createWorkerWriter } from './engine/worker-writer.js';
import type { MetricsTables } from './tables.js';

/**
 * How long a token lookup is trusted: every request needs one, and it was a
 * sixth of the database time of ingest. A token revoked by this process stops
 * at once; one revoked elsewhere (the CLI, another instance) within this time.
 */
export const TOKEN_CACHE_MS = 5_000;
const TOKEN_CACHE_MAX = 10_000;
/** Connections of the writer thread on PostgreSQL: the commits in flight plus the background passes. */
const WRITER_PG_POOL = 6;

export interface EngineStoreOptions {
  limits: MetricLimits;
  /** The service clock. */
  now: () => number;
  /** Tuning of the writer (tests shorten the seal grace). */
  writer?: Partial<Omit<WriterOptions, 'limits' | 'now'>>;
  /** Where background failures (a seal pass) are reported. */
  onError?: (e: unknown) => void;
  /** Threads that fold a long host query's blocks beside the event loop (default: one per further core, at most 4). */
  foldThreads?: number;
}

/**
 * The MetricsStore over the storage engine (./engine/): reports go to the
 * durable head through the engine's writer thread and are sealed into compressed blocks and rollups
 * in the background; reads plan over head, blocks and tiers. Tenants and
 * tokens are a handful of rows, kept on Kysely.
 */
const HOST_ID = new RegExp(AGENT_ID_PATTERN);
/**
 * Whether `id` could be a host id (what ingest accepts as an agentId). One that could not (a NUL, which PostgreSQL
 * refuses in a text parameter, a space, `..`) names no host: reads answer "no such host" without asking the database.
 */
const isHostId = (id: string): boolean => HOST_ID.test(id);

export function createEngineMetricsStore(database: Database<MetricsTables>, opts: EngineStoreOptions): MetricsStore {
  const db = database.db;
  const conn = databaseConn(database);
  const writerOptions = { ...DEFAULT_WRITER_OPTIONS, ...opts.writer, seal: { ...DEFAULT_WRITER_OPTIONS.seal, ...opts.writer?.seal }, limits: opts.limits };
  const onError = opts.onError ?? (() => undefined);
  // Appends, seals and rollups run in a writer thread on both backends: the event loop serves HTTP and reads.
  const target = database.sqlite ? { sqliteFile: database.sqlite.name } : { pgUrl: database.pgTarget!.url, pgSchema: database.pgTarget!.schema, poolSize: WRITER_PG_POOL };
  const writer = createWorkerWriter(target, writerOptions, opts.now, onError);
  const folds = createFoldPool(opts.foldThreads ?? defaultFoldThreads());
  const names = new Map<string, Map<number, string>>();
  // Quiet hosts' last blocks, decoded once rather than at every poll of the host list.
  const tails = new TailRows();
  const tokens = new Map<string, { token: { tokenId: string; tenantId: string; tenantName: string }; until: number }>();

  async function hostKeyOf(tenantId: string, hostId: string): Promise<number | undefined> {
    if (!isHostId(hostId)) return undefined;
    const [row] = await conn.all<{ key: number }>('SELECT key FROM hosts WHERE tenant_id = ? AND host_id = ?', [tenantId, hostId]);
    return row?.key;
  }

  /** Names of metric ids; the dictionary only grows and ids are never reused, so a per-tenant cache stays true. */
  async function metricNames(tenantId: string, ids: Iterable<number>): Promise<Map<number, string>> {
    let known = names.get(tenantId);
    if (!known) names.set(tenantId, (known = new Map()));
    const out = new Map<number, string>();
    const missing: number[] = [];
    for (const id of new Set(ids)) {
      const n = known.get(id);
      if (n === undefined) missing.push(id);
      else out.set(id, n);
    }
    for (const chunk of chunks(missing)) {
      const rows = await conn.all<{ id: number; name: string }>(
        `SELECT id, name FROM metric_names WHERE tenant_id = ? AND id IN (${chunk.map(() => '?').join(',')})`, [tenantId, ...chunk]);
      for (const r of rows) { known.set(r.id, r.name); out.set(r.id, r.name); }
    }
    return out;
  }

  return {
    async createTenant(tenant: Tenant) {
      const r = await db.insertInto('tenants').values({ id: tenant.id, name: tenant.name, created_at: tenant.createdAt })
        .onConflict((oc) => oc.column('name').doNothing()).executeTakeFirst();
      if (Number(r.numInsertedOrUpdatedRows ?? 0) === 0) throw new AppError('conflict', `tenant ${tenant.name} already exists`);
    },
    async findTenantByName(name) {
      const row = await db.selectFrom('tenants').selectAll().where('name', '=', name).executeTakeFirst();
      return row && { id: row.id, name: row.name, createdAt: row.created_at };
    },
    async insertToken(token) {
      await db.insertInto('tenant_tokens').values({ id: token.id, tenant_id: token.tenantId, token_hash: token.tokenHash, created_at: token.createdAt, revoked_at: null }).execute();
    },
    async findActiveToken(tokenHash) {
      const hit = tokens.get(tokenHash);
      if (hit && hit.until > Date.now()) return hit.token;
      const [row] = await conn.all<{ tokenId: string; tenantId: string; tenantName: string }>(
        `SELECT tt.id AS "tokenId", t.id AS "tenantId", t.name AS "tenantName" FROM tenant_tokens tt JOIN tenants t ON t.id = tt.tenant_id
         WHERE tt.token_hash = ? AND tt.revoked_at IS NULL`, [tokenHash]);
      // Only valid tokens are kept: guesses must not fill the cache.
      if (row) {
        if (tokens.size >= TOKEN_CACHE_MAX) tokens.delete(tokens.keys().next().value!);
        tokens.set(tokenHash, { token: row, until: Date.now() + TOKEN_CACHE_MS });
      }
      return row;
    },
    async listTokens(): Promise<TokenInfo[]> {
      const rows = await db.selectFrom('tenant_tokens').innerJoin('tenants', 'tenants.id', 'tenant_tokens.tenant_id')
        .select(['tenant_tokens.id', 'tenants.id as tenantId', 'tenants.name as tenantName', 'tenant_tokens.created_at', 'tenant_tokens.revoked_at'])
        .orderBy('tenant_tokens.created_at').orderBy('tenant_tokens.id').execute();
      return rows.map((r) => ({ id: r.id, tenantId: r.tenantId, tenantName: r.tenantName, createdAt: r.created_at, revokedAt: r.revoked_at }));
    },
    async revokeToken(id, at) {
      const r = await db.updateTable('tenant_tokens').set({ revoked_at: at }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
      tokens.clear();
      return Number(r.numUpdatedRows) > 0;
    },

    appendReport: async (report, signal) => (await writer.append([report], signal))[0]!,
    // Bulk bodies are backlogs (agents draining spools, relays): while they come fast, seals wait (seal-deferral.ts).
    appendReports: (reports, signal) => writer.append(reports, signal, true),

    async listHosts(tenantId) {
      const rows = await conn.all<{ host_id: string }>('SELECT host_id FROM hosts WHERE tenant_id = ? ORDER BY host_id', [tenantId]);
      return rows.map((r) => r.host_id);
    },
    async hostExists(tenantId, hostId) {
      return (await hostKeyOf(tenantId, hostId)) !== undefined;
    },
    async readHostSeries(tenantId, hostId, q) {
      const key = await hostKeyOf(tenantId, hostId);
      return key === undefined ? undefined : stableRead(conn, tenantId, q.from, q.to, () => readHost(conn, key, q, folds));
    },
    readAggregate: (tenantId, q) => stableRead(conn, tenantId, q.from, q.to, () => readAggregate(conn, tenantId, q, folds)),
    aggregatePointsLimit: (tenantId) => aggregatePointsLimit(conn, tenantId),
    metricNames,
    latestByHost: async (tenantId, hostId) => hostId !== undefined && !isHostId(hostId) ? [] : stableRead(conn, tenantId, 0, Number.MAX_SAFE_INTEGER, () => latestByHost(conn, tenantId, { nameOf: (ids) => metricNames(tenantId, ids), hostId, tails })),
    deleteBefore: (cutoff) => writer.deleteBefore(cutoff),
    flush: () => writer.flush(),
    async close() {
      await Promise.all([writer.close(), folds.close()]);
    },
  };
}
