// Why: the push and pull hot path as constant SQL per dialect, so each statement is prepared once and no query builder runs per push.
import type { DialectName } from '../../core/storage/database.js';
import { prepared } from '../../core/storage/prepared.js';

/**
 * Rows travel as one JSON array (SQLite, `json_each`) or as column arrays
 * (PostgreSQL, `unnest`), so no text depends on the number of rows.
 */
export interface PushSql {
  /** Takes (and creates) the business's counter row; the lock orders a business's writers. */
  lockCounter: string;
  readCounter: string;
  /** Current records by (table_name, record_uuid): primary-key lookups. */
  recordsByKey: string;
  /**
   * A record's changes newest first, walked back through `prev_version` from
   * the record's current change while the record version is above a floor:
   * input (start server version, floor) pairs and the instance, output that
   * instance's changes on the way (retry detection).
   */
  ownHistory: string;
  /**
   * PostgreSQL: inserts the changes, upserts the records and sets the counter
   * in one statement. SQLite: inserts the changes (`upsertRecords` and
   * `setCounter` follow).
   */
  write: string;
  upsertRecords?: string;
  setCounter?: string;
  /**
   * Which of the given users (business, user ids) are members of the business. PostgreSQL locks the rows it finds
   * (FOR SHARE) until commit, so a removal's DELETE waits for the transaction that read them.
   */
  members: string;
  /** A new pending conflict, answered whole. */
  insertConflict: string;
  /** This instance's conflicts on the given records (business, instance, record uuids), by id. */
  ownConflicts: string;
  /**
   * A pull page and the counter in one statement (one snapshot): the counter row joined with the changes above the
   * cursor up to it, in version order; one row with null change columns when there are none, no row for a business
   * that never pushed. Parameters: business, since_version, rows (SQLite: since_version, business, rows).
   */
  pull: string;
  /** The next part of a pull page: changes of the business above `$2` up to `$3` (the counter the first part read), at most `$4`. */
  pullAfter: string;
}

const RECORD_COLUMNS = 'table_name, record_uuid, record_version, server_version, instance_id, data';
export const CHANGE_COLUMNS = 'id, business_id, version, table_name, record_uuid, operation, data, record_version, instance_id, created_at';
const INSERT_CHANGE = 'INSERT INTO sync_changes (business_id, version, prev_version, table_name, record_uuid, operation, data, record_version, instance_id, created_at)';
const INSERT_RECORD = 'INSERT INTO sync_records (business_id, table_name, record_uuid, record_version, server_version, instance_id, data)';
const UPSERT_RECORD = 'ON CONFLICT (business_id, table_name, record_uuid) DO UPDATE SET record_version = excluded.record_version, server_version = excluded.server_version, instance_id = excluded.instance_id, data = excluded.data';
const LOCK_COUNTER = 'INSERT INTO sync_counters (business_id, server_version) VALUES ($1, 0) ON CONFLICT (business_id) DO UPDATE SET server_version = sync_counters.server_version RETURNING server_version';
const WALK = (starts: string, business: string) => 'WITH RECURSIVE walk (version, prev_version, record_version, floor, table_name, record_uuid, operation, data, instance_id, resolves_conflict) AS ('
  + `SELECT c.version, c.prev_version, c.record_version, s.floor, c.table_name, c.record_uuid, c.operation, c.data, c.instance_id, c.resolves_conflict FROM ${starts} JOIN sync_changes AS c ON c.business_id = ${business} AND c.version = s.sv `
  + 'UNION ALL '
  + `SELECT c.version, c.prev_version, c.record_version, w.floor, c.table_name, c.record_uuid, c.operation, c.data, c.instance_id, c.resolves_conflict FROM walk AS w JOIN sync_changes AS c ON c.business_id = ${business} AND c.version = w.prev_version WHERE w.record_version > w.floor) `;
/** What the instance pushed on the walk: a `local` resolution's change carries its instance id, but was not pushed by it. */
const OWN_PUSHED = 'SELECT table_name, record_uuid, record_version, operation, data FROM walk WHERE resolves_conflict IS NULL AND instance_id = ';

const CHANGE_COLUMNS_OF_C = CHANGE_COLUMNS.split(', ').map((c) => `c.${c}`).join(', ');
// SQLite walks (business_id, version) in order and stops at the limit. PostgreSQL plans the join without the
// counter's value and would sort every change above the cursor: LATERAL keeps the ordered, limited index scan.
const SQLITE_PULL = `SELECT k.server_version AS current, ${CHANGE_COLUMNS_OF_C} FROM sync_counters AS k `
  + 'LEFT JOIN sync_changes AS c ON c.business_id = k.business_id AND c.version > ? AND c.version <= k.server_version '
  + 'WHERE k.business_id = ? ORDER BY c.version LIMIT ?';
const POSTGRES_PULL = 'SELECT k.server_version AS current, c.* FROM sync_counters AS k '
  + `LEFT JOIN LATERAL (SELECT ${CHANGE_COLUMNS} FROM sync_changes WHERE business_id = k.business_id AND version > $2 AND version <= k.server_version ORDER BY version LIMIT $3) AS c ON true `
  + 'WHERE k.business_id = $1 ORDER BY c.version';

const INSERT_CONFLICT = 'INSERT INTO sync_conflicts (business_id, branch_name, table_name, record_uuid, operation, version, instance_id, local_data, remote_data, resolution, created_at, resolved_at, applied_version) '
  + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, NULL, NULL) RETURNING *";

const SQLITE: PushSql = {
  lockCounter: LOCK_COUNTER.replace('$1', '?'),
  readCounter: 'SELECT server_version FROM sync_counters WHERE business_id = ?',
  recordsByKey: `SELECT ${RECORD_COLUMNS} FROM sync_records WHERE business_id = ? AND (table_name, record_uuid) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))`,
  ownHistory: WALK("(SELECT value ->> 0 AS sv, value ->> 1 AS floor FROM json_each(?)) AS s", '?')
    + `${OWN_PUSHED}?`,
  write: `${INSERT_CHANGE} SELECT ?, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]', value ->> '$[5]', value ->> '$[6]', value ->> '$[7]', value ->> '$[8]' FROM json_each(?) ORDER BY key`,
  // `WHERE true` lets SQLite parse ON CONFLICT after INSERT ... SELECT.
  upsertRecords: `${INSERT_RECORD} SELECT ?, value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', value ->> '$[4]', value ->> '$[5]' FROM json_each(?) WHERE true ${UPSERT_RECORD}`,
  setCounter: 'UPDATE sync_counters SET server_version = ? WHERE business_id = ?',
  members: 'SELECT user_id FROM memberships WHERE business_id = ? AND user_id IN (SELECT value FROM json_each(?))',
  insertConflict: INSERT_CONFLICT.replace(/\$\d+/g, '?'),
  ownConflicts: 'SELECT * FROM sync_conflicts WHERE business_id = ? AND instance_id = ? AND record_uuid IN (SELECT value FROM json_each(?)) ORDER BY id',
  pull: SQLITE_PULL,
  pullAfter: `SELECT ${CHANGE_COLUMNS} FROM sync_changes WHERE business_id = ? AND version > ? AND version <= ? ORDER BY version LIMIT ?`,
};

const POSTGRES: PushSql = {
  lockCounter: LOCK_COUNTER,
  readCounter: 'SELECT server_version FROM sync_counters WHERE business_id = $1',
  recordsByKey: `SELECT ${RECORD_COLUMNS} FROM sync_records WHERE business_id = $1 AND (table_name, record_uuid) IN (SELECT * FROM unnest($2::text[], $3::text[]))`,
  ownHistory: WALK('unnest($2::bigint[], $3::bigint[]) AS s (sv, floor)', '$1')
    + `${OWN_PUSHED}$4`,
  write: `WITH ins AS (${INSERT_CHANGE} `
    + 'SELECT $1, v, pv, t, u, o, d, rv, i, ca FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bigint[]) AS c (v, pv, t, u, o, d, rv, i, ca)), '
    + `rec AS (${INSERT_RECORD} SELECT $1, t, u, rv, sv, i, d FROM unnest($11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::text[], $16::text[]) AS r (t, u, rv, sv, i, d) ${UPSERT_RECORD}) `
    + 'UPDATE sync_counters SET server_version = $17 WHERE business_id = $1',
  members: 'SELECT user_id FROM memberships WHERE business_id = $1 AND user_id = ANY($2::text[]) FOR SHARE',
  insertConflict: INSERT_CONFLICT,
  ownConflicts: 'SELECT * FROM sync_conflicts WHERE business_id = $1 AND instance_id = $2 AND record_uuid = ANY($3::text[]) ORDER BY id',
  pull: POSTGRES_PULL,
  pullAfter: `SELECT ${CHANGE_COLUMNS} FROM sync_changes WHERE business_id = $1 AND version > $2 AND version <= $3 ORDER BY version LIMIT $4`,
};

// PostgreSQL runs them as named statements (SQLite keeps every statement prepared anyway).
for (const text of Object.values(POSTGRES)) prepared(text);

export function pushSql(dialect: DialectName): PushSql {
  return dialect === 'postgres' ? POSTGRES : SQLITE;
}
