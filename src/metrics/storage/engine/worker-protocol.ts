import type { WireError } from '../../../core/worker/wire-error.js';
import type { NewReport } from '../../domain/metrics-store.js';

/** Why a withdrawn append was refused (nobody is left to read it; the request log shows it). */
export const WITHDRAWN = 'the client closed the connection before its reports were committed; nothing was stored';

/** What the writer thread opens: the SQLite file, or a small pool on the service's PostgreSQL schema. */
export type WriterTarget = { sqliteFile: string } | { pgUrl: string; pgSchema: string; poolSize: number };

/**
 * A report on its way to the writer thread: its metric names as a shape
 * number (report-shapes.ts; defined by an earlier or the same message) or,
 * when the table is full, the names themselves, and the values in that order.
 * A Map of 28 strings costs the thread about 5 us to rebuild; this, about 1.
 */
export type WireReport = Omit<NewReport, 'metrics'> & { shape: number; names?: string[]; values: Float64Array };

/** Messages between the service and its writer thread (writer-worker.ts). */
export type WriterRequest = { id: number; now: number } & (
  | { op: 'append'; reports: WireReport[]; backlog: boolean }
  /** The client of append `target` went away: withdraw it if it still waits in the queue. */
  | { op: 'withdraw'; target: number }
  | { op: 'delete'; cutoff: number }
  | { op: 'flush' }
  | { op: 'close' }
);

/** One message to the writer thread: the shapes numbered since the last message, then the requests. */
export interface WriterMessage {
  kind: 'requests';
  shapes: Array<[shape: number, names: string[]]>;
  requests: WriterRequest[];
}

export type WriterReply =
  | { kind: 'result'; id: number; ok: true; result: unknown }
  | { kind: 'result'; id: number; ok: false; error: WireError }
  | { kind: 'log'; error: WireError }
  | { kind: 'batch'; replies: WriterReply[] };
