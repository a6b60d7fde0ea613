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
    /** Time of the report that set hostname and platform (the newest that changed them). */
    last_ts: number;
  };
  host_metric_names: { host_key: number; metric_id: number };
  /** The durable head: raw reports not yet sealed into a block. */
  reports: { host_key: number; ts: number; samples: Uint8Array };
}
