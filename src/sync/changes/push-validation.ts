import { AppError } from '../../core/errors.js';
import { isUuid } from '../../core/uuid.js';
import type { Operation, Rejection } from './change-schemas.js';
import { canonicalJson } from './canonical-json.js';
import { PUSH_LIMITS } from './change-limits.js';

/** One valid pushed item, normalised: lower-case uuid, canonical data text (`null` for a delete). */
export interface PushItem {
  kind: 'change' | 'tombstone';
  /** Position in its array, so rejections and conflicts point back at what the device sent. */
  index: number;
  tableName: string;
  recordUuid: string;
  version: number;
  operation: Operation;
  data: string | null;
}

const CHANGE_FIELDS = new Set(['table_name', 'record_uuid', 'version', 'operation', 'data']);
const TOMBSTONE_FIELDS = new Set(['table_name', 'record_uuid', 'version']);
const OPERATIONS: readonly string[] = ['create', 'update', 'delete'];

/**
 * A push's `branch`, as conflicts record and show it: control characters (NUL,
 * which PostgreSQL text cannot hold, CR, LF, ESC), invisible format characters
 * (bidirectional overrides, zero-width characters) and line or paragraph
 * separators are refused, as in names. The whole push is refused (400): the
 * branch belongs to every item of it.
 */
export function assertBranch(branch: string | undefined): void {
  if (branch !== undefined && BRANCH_FORBIDDEN.test(branch)) {
    throw new AppError('invalid_request', 'branch: must not contain control characters, invisible format characters (such as bidirectional overrides) or line separators');
  }
}

const BRANCH_FORBIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/**
 * Checks every pushed item on its own. Valid items come back normalised, in
 * push order (changes first, then tombstones); each invalid item becomes a
 * rejection with a reason, so one bad item never hides the others.
 */
export function validatePushItems(changes: readonly unknown[], tombstones: readonly unknown[]): { items: PushItem[]; rejections: Rejection[] } {
  const items: PushItem[] = [];
  const rejections: Rejection[] = [];
  const check = (kind: PushItem['kind'], raw: unknown, index: number) => {
    const result = kind === 'change' ? checkChange(raw, index) : checkTombstone(raw, index);
    if (typeof result === 'string') rejections.push({ kind, index, ...identify(raw), reason: result });
    else items.push(result);
  };
  changes.forEach((raw, i) => check('change', raw, i));
  tombstones.forEach((raw, i) => check('tombstone', raw, i));
  return { items, rejections };
}

function identify(raw: unknown): { table_name?: string; record_uuid?: string } {
  if (!isPlainObject(raw)) return {};
  const out: { table_name?: string; record_uuid?: string } = {};
  if (typeof raw['table_name'] === 'string') out.table_name = raw['table_name'].slice(0, 100);
  // Answered as stored, lower-case, like the UUID of an item that passed.
  const uuid = raw['record_uuid'];
  if (typeof uuid === 'string') {
    const lower = uuid.toLowerCase();
    out.record_uuid = isUuid(lower) ? lower : uuid.slice(0, 100);
  }
  return out;
}

function checkCommon(raw: Record<string, unknown>, allowed: Set<string>): string | { tableName: string; recordUuid: string; version: number } {
  const unknown = Object.keys(raw).find((k) => !allowed.has(k));
  if (unknown !== undefined) return `unknown field "${unknown.slice(0, 64)}"`;
  const { table_name: tableName, record_uuid: recordUuid, version } = raw;
  if (typeof tableName !== 'string' || !PUSH_LIMITS.tableNamePattern.test(tableName)) {
    return 'table_name must be an identifier: a letter or _, then letters, digits or _, at most 63 characters';
  }
  if (!isUuid(recordUuid)) return 'record_uuid must be a UUID';
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1 || version > PUSH_LIMITS.maxVersion) {
    return 'version must be an integer from 1 (create) upwards';
  }
  return { tableName, recordUuid: recordUuid.toLowerCase(), version };
}

function checkChange(raw: unknown, index: number): PushItem | string {
  if (!isPlainObject(raw)) return 'a change must be an object';
  const common = checkCommon(raw, CHANGE_FIELDS);
  if (typeof common === 'string') return common;
  const { operation, data } = raw;
  if (typeof operation !== 'string' || !OPERATIONS.includes(operation)) return 'operation must be one of create, update, delete';
  if (operation === 'delete') {
    if (data !== undefined && data !== null && !isPlainObject(data)) return 'data must be an object';
    return { kind: 'change', index, ...common, operation: 'delete', data: null };
  }
  if (!isPlainObject(data)) return 'data must be an object';
  const text = canonicalJson(data);
  if (Buffer.byteLength(text, 'utf8') > PUSH_LIMITS.maxDataBytes) return `data is larger than ${PUSH_LIMITS.maxDataBytes} bytes of JSON`;
  return { kind: 'change', index, ...common, operation: operation as Operation, data: text };
}

function checkTombstone(raw: unknown, index: number): PushItem | string {
  if (!isPlainObject(raw)) return 'a tombstone must be an object';
  const common = checkCommon(raw, TOMBSTONE_FIELDS);
  if (typeof common === 'string') return common;
  return { kind: 'tombstone', index, ...common, operation: 'delete', data: null };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
