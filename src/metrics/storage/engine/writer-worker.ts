import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { toWireError } from '../../../core/worker/wire-error.js';
import { createPgPool } from '../../../core/storage/pg-pool.js';
import { configureSqliteConnection } from '../../../core/storage/sqlite-connection.js';
import { createEngineWriter, type WriterOptions } from './engine-writer.js';
import { walSync } from './wal-sync.js';
import { METRICS_SQLITE_CACHE_KIB, pgConn, sqliteConn, type SqlConn } from './sql-conn.js';
import { readWireReports } from './wire-reports.js';
import type { WriterMessage, WriterReply, WriterTarget } from './worker-protocol.js';

/**
 * The writer thread: owns the connections that write the engine's tables, so
 * group commits (and on SQLite their fsyncs), seals and rollups run here, off
 * the HTTP event loop. Requests carry the service clock, which the seal loop
 * follows between them.
 */
const WAL_BACKSTOP_PAGES = 4096;
const { target, options } = workerData as { target: WriterTarget; options: Omit<WriterOptions, 'now'> };
const port = parentPort!;
let conn: SqlConn;
let closeConnection: () => Promise<void>;
let syncLog: (() => Promise<void>) | undefined;
if ('sqliteFile' in target) {
  const db = new BetterSqlite3(target.sqliteFile);
  db.pragma('journal_mode = WAL');
  // The service's settings (sqlite-connection.ts): every commit fsynced (FULL), and a checkpointed WAL cut back to
  // 1 MiB when it restarts (without that limit on this, the writing connection, the WAL file kept its ~5 MB
  // high-water mark under ingest). The seal loop checkpoints twice a second (engine-writer.ts); SQLite's own
  // checkpoint inside a commit is the backstop, at 4 MiB of WAL (4,096 of the metrics file's 1 KiB pages).
  configureSqliteConnection(db, { cacheKiB: METRICS_SQLITE_CACHE_KIB, walAutocheckpointPages: WAL_BACKSTOP_PAGES });
  conn = sqliteConn(db);
  // Appends commit at synchronous=NORMAL (SQLite writes the WAL frames, no fsync) and are answered after this fsync
  // of the WAL, on libuv's pool, so the next batch commits meanwhile. In WAL mode the frames of a commit are either
  // still in the WAL, which this makes durable, or already checkpointed, which fsyncs both files first.
  const wal = walSync(`${target.sqliteFile}-wal`);
  syncLog = wal.sync;
  closeConnection = async () => { db.close(); wal.close(); };
} else {
  const pool = createPgPool(target.pgUrl, target.pgSchema, target.poolSize, 'metrics');
  conn = pgConn(pool);
  closeConnection = () => pool.end();
}

let clock = { service: Date.now(), wall: Date.now() };
const now = () => clock.service + (Date.now() - clock.wall);
const writer = createEngineWriter(conn, { ...options, now }, (e) => port.postMessage({ kind: 'log', error: toWireError(e) } satisfies WriterReply), syncLog);

let replies: WriterReply[] = [];
function reply(r: WriterReply): void {
  if (!replies.length) setImmediate(() => { const out = replies; replies = []; port.postMessage({ kind: 'batch', replies: out } satisfies WriterReply); });
  replies.push(r);
}

/** Appends still settling, by request id, so that a withdrawal can reach them. */
const withdrawals = new Map<number, AbortController>();

/** The service's shape numbers (report-shapes.ts): a report's names, shared by every report of the shape. */
const shapes = new Map<number, string[]>();

port.on('message', (msg: WriterMessage) => {
  for (const [shape, names] of msg.shapes) shapes.set(shape, names);
  for (const req of msg.requests) {
    clock = { service: req.now, wall: Date.now() };
    const settle = (p: Promise<unknown>) => p.then(
      (result) => reply({ kind: 'result', id: req.id, ok: true, result }),
      (e: unknown) => reply({ kind: 'result', id: req.id, ok: false, error: toWireError(e) }));
    if (req.op === 'append') {
      const ac = new AbortController();
      withdrawals.set(req.id, ac);
      void settle(writer.append(readWireReports(msg.reports, shapes, req.from, req.to), ac.signal, req.backlog).finally(() => withdrawals.delete(req.id)));
    } else if (req.op === 'withdraw') withdrawals.get(req.target)?.abort();
    else if (req.op === 'delete') void settle(writer.deleteBefore(req.cutoff));
    else if (req.op === 'flush') void settle(writer.flush());
    else {
      void writer.close().then(closeConnection).then(() => {
        port.postMessage({ kind: 'batch', replies: [...replies, { kind: 'result', id: req.id, ok: true, result: null }] } satisfies WriterReply);
        port.close();
      });
    }
  }
});
