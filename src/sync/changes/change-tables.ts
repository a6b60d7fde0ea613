import type { Generated } from 'kysely';

/** Row types of the tables migration 0002 creates for changes and conflicts. */
export interface ChangeTables {
  /** One row per business: the last server version handed out. Writers lock it for the whole transaction. */
  sync_counters: { business_id: string; server_version: number };
  /** The change log, one row per applied change; pull reads it in `version` order. */
  sync_changes: {
    id: Generated<number>;
    business_id: string;
    version: number;
    table_name: string;
    record_uuid: string;
    operation: string;
    /** Canonical JSON text; null for a delete. */
    data: string | null;
    record_version: number;
    instance_id: string;
    /** Epoch milliseconds. */
    created_at: number;
    /** Server version of the previous change of the same record (null for its first): retry detection walks this chain. */
    prev_version: number | null;
    /** The conflict a `local` resolution applied with this change; null for a pushed change (retry detection skips the others). */
    resolves_conflict: number | null;
  };
  /** Current state of each record: its latest applied change. The version rule reads it. */
  sync_records: {
    business_id: string;
    table_name: string;
    record_uuid: string;
    record_version: number;
    server_version: number;
    instance_id: string;
    /** Null once the record is deleted. */
    data: string | null;
  };
  sync_conflicts: {
    id: Generated<number>;
    business_id: string;
    branch_name: string;
    table_name: string;
    record_uuid: string;
    operation: string;
    version: number;
    instance_id: string;
    local_data: string;
    remote_data: string;
    resolution: string;
    created_at: number;
    resolved_at: number | null;
    applied_version: number | null;
  };
}
