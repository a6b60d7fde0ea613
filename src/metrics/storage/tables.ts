import type { Generated } from 'kysely';

/** Row types of the metrics tables, as Kysely sees them (BIGINT columns arrive as numbers). */
export interface MetricsTables {
  tenants: { id: string; name: string; created_at: number };
  tenant_tokens: { id: string; tenant_id: string; token_hash: string; created_at: number; revoked_at: number | null };
  metric_names: { id: Generated<number>; tenant_id: string; name: string };
  hosts: {
    key: Generated<number>;
    tenant_id: string;
    host_id: string;
    hostname: string;
    platform: string;
    last_ts: number;
    cpu_usage: number | null;
    memory_percent: number | null;
    disk_percent: number | null;
    interval_ms: number | null;
  };
  host_metric_names: { host_key: number; metric_id: number };
  reports: { host_key: number; ts: number; samples: Uint8Array };
}
