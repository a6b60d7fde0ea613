import { sql, type Transaction } from 'kysely';
import { AppError } from '../../core/errors.js';
import type { Database } from '../../core/storage/database.js';
import type { SampleRow } from '../domain/downsample.js';
import type { AppendOutcome, HostLatest, MetricLimits, MetricsStore, NewReport, Tenant, TokenInfo } from '../domain/metrics-store.js';
import { chunks } from '../../core/storage/chunks.js';
import { createGroupCommitter } from './group-commit.js';
import { decodeSamples, encodeSamples } from './sample-codec.js';
import type { MetricsTables } from './tables.js';

/** Reports per group-commit transaction; bounds a transaction's statement sizes and lock time. */
const MAX_BATCH = 500;
/** Rows per page of a range read; bounds memory whatever the range. */
const PAGE_ROWS = 4_000;
/** Tries of one group-commit transaction that PostgreSQL aborted as a deadlock or serialization failure. */
const MAX_ATTEMPTS = 5;

/** PostgreSQL's deadlock_detected and serialization_failure: the transaction was rolled back and may be retried. */
function isTransient(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return code === '40P01' || code === '40001';
}

/**
 * The MetricsStore over Kysely. The SQL is portable between SQLite (3.35+)
 * and PostgreSQL (ON CONFLICT, RETURNING); the dialect-specific parts are the
 * column types in the migrations.
 *
 * Caches, all safe with several instances on one database: metric name ids
 * (the dictionary only grows) and each host's set of metric ids (only used to
 * skip work when a report brings nothing new; any new name re-reads the truth
 * inside the transaction before a limit is checked).
 */
export function createKyselyMetricsStore(database: Database<MetricsTables>, limits: MetricLimits): MetricsStore {
  const db = database.db;
  const nameIds = new Map<string, Map<string, number>>();
  const hostMetricIds = new Map<number, Set<number>>();
  const committer = createGroupCommitter<NewReport, AppendOutcome>(commitBatch, {
    maxBatch: MAX_BATCH,
    onClosedSubmit: () => new AppError('unavailable', 'the service is shutting down'),
  });

  async function commitBatch(batch: NewReport[]): Promise<AppendOutcome[]> {
    for (let attempt = 1; ; attempt++) {
      const after: Array<() => void> = [];
      try {
        const outcomes = await db.transaction().execute((trx) => appendInTransaction(trx, batch, after));
        for (const apply of after) apply();
        return outcomes;
      } catch (e: unknown) {
        if (attempt >= MAX_ATTEMPTS || !isTransient(e)) throw e;
        // Two instances creating the same new hosts or names in different orders can deadlock on
        // PostgreSQL; the loser is rolled back whole, so running the batch again is safe.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
      }
    }
  }

  async function appendInTransaction(trx: Transaction<MetricsTables>, batch: NewReport[], after: Array<() => void>): Promise<AppendOutcome[]> {
    const outcomes: AppendOutcome[] = new Array(batch.length);
    const seen = new Set<string>();
    const hostKeys = await selectHostKeys(trx, batch);
    const ids = new Map<string, Map<string, number>>();
    const tenantCounts = new Map<string, number>();
    const hostSets = new Map<number, { ids: Set<number>; fresh: boolean }>();
    const rows: Array<{ index: number; hostKey: number; report: NewReport }> = [];

    for (const [index, report] of batch.entries()) {
      const seenKey = `${report.tenantId}\0${report.hostId}\0${report.ts}`;
      if (seen.has(seenKey)) { outcomes[index] = { status: 'duplicate' }; continue; }
      seen.add(seenKey);
      const tenantIds = ids.get(report.tenantId) ?? await loadNameIds(trx, report.tenantId, batch);
      ids.set(report.tenantId, tenantIds);
      const unknown = [...report.metrics.keys()].filter((n) => !tenantIds.has(n));
      if (unknown.length) {
        const count = tenantCounts.get(report.tenantId) ?? await countTenantNames(trx, report.tenantId);
        tenantCounts.set(report.tenantId, count);
        if (count + unknown.length > limits.perTenant) {
          outcomes[index] = { status: 'limit_exceeded', details: `the report would take the tenant to ${count + unknown.length} distinct metric names; the limit is ${limits.perTenant}` };
          continue;
        }
      }
      const hostMapKey = `${report.tenantId}\0${report.hostId}`;
      let hostKey = hostKeys.get(hostMapKey);
      const names = [...report.metrics.keys()];
      const newFor = (set: Set<number>) => names.filter((n) => { const id = tenantIds.get(n); return id === undefined || !set.has(id); });
      let host = hostKey === undefined ? { ids: new Set<number>(), fresh: true } : hostSets.get(hostKey);
      if (!host && hostKey !== undefined) {
        const cached = hostMetricIds.get(hostKey);
        host = cached ? { ids: new Set(cached), fresh: false } : { ids: await loadHostMetricIds(trx, hostKey), fresh: true };
      }
      // The cache may lag another instance's writes: a limit is only ever judged on a fresh read.
      if (host && !host.fresh && hostKey !== undefined && newFor(host.ids).length) host = { ids: await loadHostMetricIds(trx, hostKey), fresh: true };
      const hostIds = host!.ids;
      const newForHost = newFor(hostIds);
      if (hostIds.size + newForHost.length > limits.perHost) {
        outcomes[index] = { status: 'limit_exceeded', details: `the report would take host ${report.hostId} to ${hostIds.size + newForHost.length} distinct metric names; the limit is ${limits.perHost}` };
        continue;
      }

      if (unknown.length) {
        await insertNames(trx, report.tenantId, unknown, tenantIds);
        tenantCounts.set(report.tenantId, tenantCounts.get(report.tenantId)! + unknown.length);
      }
      if (hostKey === undefined) {
        hostKey = await insertHost(trx, report);
        hostKeys.set(hostMapKey, hostKey);
      }
      if (newForHost.length) {
        const newIds = newForHost.map((n) => tenantIds.get(n)!);
        for (const chunk of chunks(newIds)) {
          await trx.insertInto('host_metric_names').values(chunk.map((metric_id) => ({ host_key: hostKey!, metric_id })))
            .onConflict((oc) => oc.columns(['host_key', 'metric_id']).doNothing()).execute();
        }
        for (const id of newIds) hostIds.add(id);
      }
      hostSets.set(hostKey, host!);
      rows.push({ index, hostKey, report });
    }

    const inserted = new Set<string>();
    for (const chunk of chunks(rows, 200)) {
      const values = chunk.map(({ hostKey, report }) => {
        const tenantIds = ids.get(report.tenantId)!;
        return { host_key: hostKey, ts: report.ts, samples: encodeSamples([...report.metrics].map(([n, v]) => [tenantIds.get(n)!, v])) };
      });
      const done = await trx.insertInto('reports').values(values)
        .onConflict((oc) => oc.columns(['host_key', 'ts']).doNothing())
        .returning(['host_key', 'ts']).execute();
      for (const r of done) inserted.add(`${r.host_key}\0${r.ts}`);
    }
    const latest = new Map<number, NewReport>();
    for (const { index, hostKey, report } of rows) {
      const stored = inserted.has(`${hostKey}\0${report.ts}`);
      outcomes[index] = { status: stored ? 'stored' : 'duplicate' };
      if (stored && (latest.get(hostKey)?.ts ?? -1) < report.ts) latest.set(hostKey, report);
    }
    for (const chunk of chunks([...latest.values()], 200)) await upsertLatest(trx, chunk);

    after.push(() => {
      for (const [tenantId, m] of ids) nameIds.set(tenantId, m);
      for (const [key, host] of hostSets) hostMetricIds.set(key, host.ids);
    });
    return outcomes;
  }

  async function selectHostKeys(trx: Transaction<MetricsTables>, batch: NewReport[]): Promise<Map<string, number>> {
    const byTenant = new Map<string, Set<string>>();
    for (const r of batch) {
      let s = byTenant.get(r.tenantId);
      if (!s) byTenant.set(r.tenantId, (s = new Set()));
      s.add(r.hostId);
    }
    const out = new Map<string, number>();
    for (const [tenantId, hosts] of byTenant) {
      for (const chunk of chunks([...hosts])) {
        const found = await trx.selectFrom('hosts').select(['key', 'host_id'])
          .where('tenant_id', '=', tenantId).where('host_id', 'in', chunk).execute();
        for (const h of found) out.set(`${tenantId}\0${h.host_id}`, h.key);
      }
    }
    return out;
  }

  /** The tenant's known ids for every name the batch uses (cache first, then the database). */
  async function loadNameIds(trx: Transaction<MetricsTables>, tenantId: string, batch: NewReport[]): Promise<Map<string, number>> {
    const cached = nameIds.get(tenantId);
    const out = new Map(cached);
    const wanted = new Set<string>();
    for (const r of batch) if (r.tenantId === tenantId) for (const n of r.metrics.keys()) if (!out.has(n)) wanted.add(n);
    for (const chunk of chunks([...wanted])) {
      const found = await trx.selectFrom('metric_names').select(['id', 'name'])
        .where('tenant_id', '=', tenantId).where('name', 'in', chunk).execute();
      for (const f of found) out.set(f.name, f.id);
    }
    return out;
  }

  async function countTenantNames(trx: Transaction<MetricsTables>, tenantId: string): Promise<number> {
    const r = await trx.selectFrom('metric_names').select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenantId).executeTakeFirstOrThrow();
    return Number(r.n);
  }

  async function loadHostMetricIds(trx: Transaction<MetricsTables>, hostKey: number): Promise<Set<number>> {
    const rows = await trx.selectFrom('host_metric_names').select('metric_id').where('host_key', '=', hostKey).execute();
    return new Set(rows.map((r) => r.metric_id));
  }

  async function insertNames(trx: Transaction<MetricsTables>, tenantId: string, names: string[], into: Map<string, number>): Promise<void> {
    for (const chunk of chunks(names)) {
      await trx.insertInto('metric_names').values(chunk.map((name) => ({ tenant_id: tenantId, name })))
        .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing()).execute();
      const found = await trx.selectFrom('metric_names').select(['id', 'name'])
        .where('tenant_id', '=', tenantId).where('name', 'in', chunk).execute();
      for (const f of found) into.set(f.name, f.id);
    }
  }

  async function insertHost(trx: Transaction<MetricsTables>, r: NewReport): Promise<number> {
    // A concurrent instance may create the same host first: keep its row and read its key.
    await trx.insertInto('hosts').values(hostRow(r)).onConflict((oc) => oc.columns(['tenant_id', 'host_id']).doNothing()).execute();
    const row = await trx.selectFrom('hosts').select('key').where('tenant_id', '=', r.tenantId).where('host_id', '=', r.hostId).executeTakeFirstOrThrow();
    return row.key;
  }

  async function upsertLatest(trx: Transaction<MetricsTables>, reports: NewReport[]): Promise<void> {
    await trx.insertInto('hosts').values(reports.map(hostRow))
      .onConflict((oc) => oc.columns(['tenant_id', 'host_id'])
        .doUpdateSet((eb) => ({
          hostname: eb.ref('excluded.hostname'),
          platform: eb.ref('excluded.platform'),
          last_ts: eb.ref('excluded.last_ts'),
          cpu_usage: eb.ref('excluded.cpu_usage'),
          memory_percent: eb.ref('excluded.memory_percent'),
          disk_percent: eb.ref('excluded.disk_percent'),
          // The gap to the previous latest report; an equal ts (a duplicate) keeps the old gap.
          interval_ms: sql<number | null>`CASE WHEN excluded.last_ts > hosts.last_ts THEN excluded.last_ts - hosts.last_ts ELSE hosts.interval_ms END`,
        }))
        .where((eb) => eb('hosts.last_ts', '<=', eb.ref('excluded.last_ts'))))
      .execute();
  }

  async function hostKeyOf(tenantId: string, hostId: string): Promise<number | undefined> {
    const row = await db.selectFrom('hosts').select('key').where('tenant_id', '=', tenantId).where('host_id', '=', hostId).executeTakeFirst();
    return row?.key;
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
      const row = await db.selectFrom('tenant_tokens').innerJoin('tenants', 'tenants.id', 'tenant_tokens.tenant_id')
        .select(['tenant_tokens.id as tokenId', 'tenants.id as tenantId', 'tenants.name as tenantName'])
        .where('tenant_tokens.token_hash', '=', tokenHash).where('tenant_tokens.revoked_at', 'is', null).executeTakeFirst();
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
      return Number(r.numUpdatedRows) > 0;
    },

    appendReport: (report) => committer.submit(report),
    appendReports: (reports) => Promise.all(reports.map((r) => committer.submit(r))),

    async listHosts(tenantId) {
      const rows = await db.selectFrom('hosts').select('host_id').where('tenant_id', '=', tenantId).orderBy('host_id').execute();
      return rows.map((r) => r.host_id);
    },
    async hostExists(tenantId, hostId) {
      return (await hostKeyOf(tenantId, hostId)) !== undefined;
    },
    async *scanReports(tenantId, hostId, from, to): AsyncIterable<SampleRow[]> {
      const key = await hostKeyOf(tenantId, hostId);
      if (key === undefined) return;
      let next = from;
      for (;;) {
        const rows = await db.selectFrom('reports').select(['ts', 'samples'])
          .where('host_key', '=', key).where('ts', '>=', next).where('ts', '<=', to)
          .orderBy('ts').limit(PAGE_ROWS).execute();
        if (rows.length) yield rows.map((r) => ({ ts: r.ts, ...decodeSamples(r.samples) }));
        if (rows.length < PAGE_ROWS) return;
        next = rows[rows.length - 1]!.ts + 1;
      }
    },
    async metricNames(tenantId, ids) {
      const out = new Map<number, string>();
      for (const chunk of chunks([...new Set(ids)])) {
        const rows = await db.selectFrom('metric_names').select(['id', 'name']).where('tenant_id', '=', tenantId).where('id', 'in', chunk).execute();
        for (const r of rows) out.set(r.id, r.name);
      }
      return out;
    },
    async latestByHost(tenantId): Promise<HostLatest[]> {
      const rows = await db.selectFrom('hosts').select(['host_id', 'hostname', 'platform', 'last_ts', 'cpu_usage', 'memory_percent', 'disk_percent', 'interval_ms'])
        .where('tenant_id', '=', tenantId).orderBy('hostname').orderBy('host_id').execute();
      return rows.map((r) => ({
        hostId: r.host_id, hostname: r.hostname, platform: r.platform, lastTs: r.last_ts,
        cpuUsage: r.cpu_usage, memoryPercent: r.memory_percent, diskPercent: r.disk_percent, intervalMs: r.interval_ms,
      }));
    },
    async deleteBefore(cutoff) {
      const keys = (await db.selectFrom('hosts').select('key').execute()).map((r) => r.key);
      let reports = 0;
      // Per host, so each delete is a range of the (host_key, ts) primary key and short enough not to stall ingest.
      for (const chunk of chunks(keys, 50)) {
        const r = await db.deleteFrom('reports').where('host_key', 'in', chunk).where('ts', '<', cutoff).executeTakeFirst();
        reports += Number(r.numDeletedRows);
      }
      const gone = await db.deleteFrom('hosts').where('last_ts', '<', cutoff).returning('key').execute();
      for (const g of gone) hostMetricIds.delete(g.key);
      return { reports, hosts: gone.length };
    },
    async close() {
      await committer.close();
    },
  };
}

function hostRow(r: NewReport) {
  return {
    tenant_id: r.tenantId,
    host_id: r.hostId,
    hostname: r.hostname,
    platform: r.platform,
    last_ts: r.ts,
    cpu_usage: r.metrics.get('cpu.usage') ?? null,
    memory_percent: r.metrics.get('memory.percent') ?? null,
    disk_percent: fullestDisk(r.metrics),
    interval_ms: null,
  };
}

function fullestDisk(metrics: Map<string, number>): number | null {
  let max: number | null = null;
  for (const [name, v] of metrics) {
    if (name.startsWith('disk.') && name.endsWith('.percent') && (max === null || v > max)) max = v;
  }
  return max;
}


