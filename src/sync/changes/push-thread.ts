// Why: on SQLite, push transactions (their statements, fsyncs and checkpoints) run on this thread's own connection, off the HTTP event loop.
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { configureSqliteConnection } from '../../core/storage/sqlite-connection.js';
import { toWireError } from '../../core/worker/wire-error.js';
import { createGroupApplier, type Exec } from './push-apply.js';
import type { PushThreadReply, PushThreadRequest } from './push-thread-client.js';

const port = parentPort!;
const sqlite = new BetterSqlite3((workerData as { sqliteFile: string }).sqliteFile);
// Every push lands here: a larger page cache keeps the records' primary-key index (random keys) in memory, and a longer
// interval between checkpoints writes a page that many pushes dirtied once per checkpoint, not once per few commits.
configureSqliteConnection(sqlite, { cacheKiB: 65536, walAutocheckpointPages: 8000 });

// better-sqlite3 directly, statements kept prepared: the thread starts in a few tens of milliseconds without the query builder.
const statements = new Map<string, BetterSqlite3.Statement>();
const exec: Exec = async <R>(text: string, params: readonly unknown[]) => {
  let stmt = statements.get(text);
  if (!stmt) statements.set(text, (stmt = sqlite.prepare(text)));
  if (stmt.reader) return stmt.all(...params) as R[];
  stmt.run(...params);
  return [];
};
const apply = createGroupApplier('sqlite');

/** One group, in one IMMEDIATE transaction (the write lock first, so the service's connection cannot slip in between). */
async function applyGroup(group: Parameters<typeof apply>[1]) {
  sqlite.exec('BEGIN IMMEDIATE');
  try {
    const result = await apply(exec, group);
    sqlite.exec('COMMIT');
    return result;
  } catch (e: unknown) {
    if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
    throw e;
  }
}

port.postMessage({ ready: true } satisfies PushThreadReply);

// Groups run one after another, and closing waits for the one in flight.
let last: Promise<unknown> = Promise.resolve();
port.on('message', (req: PushThreadRequest) => {
  if (req.op === 'close') {
    void last.then(() => sqlite.close()).then(() => port.close());
    return;
  }
  last = last.then(() => applyGroup(req.group)).then(
    (result) => port.postMessage({ id: req.id, ok: true, result } satisfies PushThreadReply),
    (e: unknown) => port.postMessage({ id: req.id, ok: false, error: toWireError(e) } satisfies PushThreadReply));
});
