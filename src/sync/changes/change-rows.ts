// Why: one place turns stored change and conflict rows into their wire shapes, for the store and the group applier alike.
import type { Selectable } from 'kysely';
import type { Conflict, Operation } from './change-schemas.js';
import type { ChangeTables } from './change-tables.js';
import type { StoredChange } from './change-store.js';

export type ChangeRow = Omit<Selectable<ChangeTables['sync_changes']>, 'prev_version' | 'resolves_conflict'>;
type ConflictRow = Selectable<ChangeTables['sync_conflicts']>;

export function toStoredChange(row: ChangeRow): StoredChange {
  return {
    id: Number(row.id),
    business_id: row.business_id,
    version: Number(row.version),
    table_name: row.table_name,
    record_uuid: row.record_uuid,
    operation: row.operation as Operation,
    data: row.data,
    record_version: Number(row.record_version),
    instance_id: row.instance_id,
    created_at: isoTime(Number(row.created_at)),
  };
}

/**
 * A pull answer's JSON, written directly: each change's data is stored as
 * canonical JSON text (checked and normalised when it was pushed), so it goes
 * in as it is instead of being parsed and serialised again. Same shape as
 * `PullResultSchema`.
 */
export function pullResultJson(page: { changes: readonly StoredChange[]; version: number; hasMore: boolean }): string {
  const s = JSON.stringify;
  const changes = page.changes.map((c) => `{"id":${c.id},"business_id":${s(c.business_id)},"version":${c.version},"table_name":${s(c.table_name)},`
    + `"record_uuid":${s(c.record_uuid)},"operation":${s(c.operation)},"data":${c.data ?? '{}'},"record_version":${c.record_version},`
    + `"instance_id":${s(c.instance_id)},"created_at":${s(c.created_at)}}`);
  return `{"changes":[${changes.join(',')}],"version":${page.version},"has_more":${page.hasMore}}`;
}

// A push's changes share one created_at, so a pulled page repeats few distinct times; formatting each once saves pull CPU.
let lastTime = NaN;
let lastIso = '';
export function isoTime(ms: number): string {
  if (ms !== lastTime) {
    lastTime = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

export function toConflict(row: ConflictRow): Conflict {
  return {
    id: row.id,
    business_id: row.business_id,
    branch_name: row.branch_name,
    table_name: row.table_name,
    record_uuid: row.record_uuid,
    // JSON text, always a string as the specification types it: a delete's side is the text `null`.
    local_data: row.local_data,
    remote_data: row.remote_data,
    resolution: row.resolution as Conflict['resolution'],
    created_at: new Date(row.created_at).toISOString(),
    operation: row.operation as Operation,
    version: row.version,
    instance_id: row.instance_id,
    resolved_at: row.resolved_at === null ? null : new Date(row.resolved_at).toISOString(),
    applied_version: row.applied_version,
  };
}
