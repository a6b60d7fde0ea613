import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { isAppError } from '../../../core/errors.js';
import { createEngineWriter, type WriterOptions } from './engine-writer.js';
import { sqliteConn } from './sql-conn.js';
import type { WriterReply, WriterRequest } from './worker-protocol.js';

/**
 * The SQLite writer thread: owns the only connection that writes the engine's
 * tables, so each group commit's fsync and every seal run here, off the HTTP
 * event loop. Requests carry the service clock, which the seal loop follows
 * between them.
 */
const { file, options } = workerData as { file: string; options: Omit<WriterOptions, 'now'> };
const port = parentPort!;
const db = new BetterSqlite3(file);
db.pragma('journal_mode = WAL');
// FULL: every commit is fsynced before the service answers.
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = 5000');
db.pragma('foreign_keys = ON');
// Checkpoint every ~1 MiB of WAL rather than 4: the WAL's size on disk stays small, and checkpoints run here, off the event loop.
db.pragma('wal_autocheckpoint = 256');

let clock = { service: Date.now(), wall: Date.now() };
const now = () => clock.service + (Date.now() - clock.wall);
const writer = createEngineWriter(sqliteConn(db), { ...options, now }, (e) => port.postMessage({ kind: 'log', error: describe(e) } satisfies WriterReply));

let replies: WriterReply[] = [];
function reply(r: WriterReply): void {
  if (!replies.length) setImmediate(() => { const out = replies; replies = []; port.postMessage({ kind: 'batch', replies: out } satisfies WriterReply); });
  replies.push(r);
}

function describe(e: unknown): { message: string; code?: string; appCode?: string; details?: string; extra?: Record<string, unknown> } {
  if (isAppError(e)) return { message: e.message, appCode: e.code, ...(e.details !== undefined ? { details: e.details } : {}), ...(e.extra ? { extra: e.extra } : {}) };
  const code = (e as { code?: unknown }).code;
  return { message: e instanceof Error ? e.message : String(e), ...(typeof code === 'string' ? { code } : {}) };
}

port.on('message', (msg: { kind: 'requests'; requests: WriterRequest[] }) => {
  for (const req of msg.requests) {
    clock = { service: req.now, wall: Date.now() };
    const settle = (p: Promise<unknown>) => p.then(
      (result) => reply({ kind: 'result', id: req.id, ok: true, result }),
      (e: unknown) => reply({ kind: 'result', id: req.id, ok: false, error: describe(e) }));
    if (req.op === 'append') void settle(writer.append(req.reports));
    else if (req.op === 'delete') void settle(writer.deleteBefore(req.cutoff));
    else if (req.op === 'flush') void settle(writer.flush());
    else {
      void writer.close().then(() => {
        db.close();
        port.postMessage({ kind: 'batch', replies: [...replies, { kind: 'result', id: req.id, ok: true, result: null }] } satisfies WriterReply);
        port.close();
      });
    }
  }
});
