// Why: the two automatic policies apps ask for most, written once against the conflict view the engine surfaces.
import type { RecordData } from './local-store.js';
import type { Conflict } from './wire.js';

/** A pending conflict as the app sees it: both sides parsed, plus what the device started from. */
export interface ConflictView {
  id: number;
  table: string;
  uuid: string;
  /**
   * This device's latest state of the record (null: it deleted it): what it pushed, or the edits it made since, which
   * wait for the resolution and which every choice but `remote` and `skip` keeps.
   */
  local: RecordData | null;
  /** What the server held when the conflict arose (null: deleted there). */
  remote: RecordData | null;
  /** The server state this device's edits started from, when known (null for a record created here or unknown). */
  base: RecordData | null;
  /** Device clock of this device's latest edit of the record (epoch ms): the one `local` shows. */
  localEditedAt: number;
  /** Server time of the remote change, when this device has pulled it (epoch ms). */
  remoteAt: number | undefined;
  /** The server's conflict object as listed by GET /api/sync/conflicts. */
  conflict: Conflict;
}

/**
 * What to do with a conflict: keep this device's side (`local`), the server's
 * (`remote`), close it leaving the record as the server has it (`skip`), or
 * write a merged record (`{ merged }`: the server's side is kept and the merge
 * is pushed as a new local edit on top of it).
 */
export type ConflictChoice = 'local' | 'remote' | 'skip' | { merged: RecordData };

/** Returns a choice, or undefined to leave the conflict pending for the app (it stays in `conflicts()`). */
export type ConflictResolver = (conflict: ConflictView) => ConflictChoice | undefined | Promise<ConflictChoice | undefined>;

/**
 * Last writer wins by edit time: this device's edit time against the server
 * time of the remote change (clocks are assumed roughly in step). When the
 * remote change was never pulled, the local side wins: it reached the server last.
 */
export const lastWriterWins: ConflictResolver = (c) => (c.remoteAt !== undefined && c.remoteAt > c.localEditedAt ? 'remote' : 'local');

/**
 * Three-way field merge: every field this device changed (compared with
 * `base`) takes the local value, every other field the remote value. A delete
 * on either side is not merged: a remote delete keeps the remote side, a local
 * delete the local side.
 */
export const fieldMerge: ConflictResolver = (c) => {
  if (c.remote === null) return 'remote';
  if (c.local === null) return 'local';
  return { merged: applyFieldChanges(c.remote, c.base ?? {}, c.local) };
};

/** `onto` with every field that differs between `from` and `to` set as in `to` (removed where `to` lacks it). */
export function applyFieldChanges(onto: RecordData, from: RecordData, to: RecordData): RecordData {
  const out: RecordData = { ...onto };
  for (const key of new Set([...Object.keys(from), ...Object.keys(to)])) {
    if (sameJson(from[key], to[key])) continue;
    if (key in to) out[key] = to[key];
    else delete out[key];
  }
  return out;
}

/** Structural equality of JSON values (object key order ignored). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
