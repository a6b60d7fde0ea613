import type { WireError } from '../../../core/worker/wire-error.js';
import type { WireReports } from './wire-reports.js';

/** Why a withdrawn append was refused (nobody is left to read it; the request log shows it). */
export const WITHDRAWN = 'the client closed the connection before its reports were committed; nothing was stored';

/** What the writer thread opens: the SQLite file, or a small pool on the service's PostgreSQL schema. */
export type WriterTarget = { sqliteFile: string } | { pgUrl: string; pgSchema: string; poolSize: number };

/** Messages between the service and its writer thread (writer-worker.ts). */
export type WriterRequest = { id: number; now: number } & (
  /** Reports [from, to) of the message's `reports`. */
  | { op: 'append'; from: number; to: number; backlog: boolean }
  /** The client of append `target` went away: withdraw it if it still waits in the queue. */
  | { op: 'withdraw'; target: number }
  | { op: 'delete'; cutoff: number }
  | { op: 'flush' }
  | { op: 'close' }
);

/** One message to the writer thread: the shapes numbered since the last message, the reports its appends hold, then the requests. */
export interface WriterMessage {
  kind: 'requests';
  shapes: Array<[shape: number, names: string[]]>;
  reports: WireReports;
  requests: WriterRequest[];
}

export type WriterReply =
  | { kind: 'result'; id: number; ok: true; result: unknown }
  | { kind: 'result'; id: number; ok: false; error: WireError }
  | { kind: 'log'; error: WireError }
  | { kind: 'batch'; replies: WriterReply[] };
