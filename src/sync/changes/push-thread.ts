// Why: on SQLite, push transactions (their statements, fsyncs and checkpoints) run on this thread's own connection, off the HTTP event loop.
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { configureSqliteConnection, sqliteKysely } from '../../core/storage/database.js';
import { toWireError } from '../../core/worker/wire-error.js';
import type { ChangeTables } from './change-tables.js';
import { createGroupApplier } from './push-apply.js';
import type { PushThreadReply, PushThreadRequest } from './push-thread-client.js';

const port = parentPort!;
const sqlite = new BetterSqlite3((workerData as { sqliteFile: string }).sqliteFile);
configureSqliteConnection(sqlite);
// Every push lands here: a larger page cache keeps the records' primary-key index (random keys) in memory, and a longer
// interval between checkpoints writes a page that many pushes dirtied once per checkpoint, not once per few commits.
sqlite.pragma('cache_size = -65536');
sqlite.pragma('wal_autocheckpoint = 8000');
const db = sqliteKysely<ChangeTables>(sqlite);
const apply = createGroupApplier('sqlite');
port.postMessage({ ready: true } satisfies PushThreadReply);

// Groups run one after another, and closing waits for the one in flight.
let last: Promise<unknown> = Promise.resolve();
port.on('message', (req: PushThreadRequest) => {
  if (req.op === 'close') {
    void last.then(() => db.destroy()).then(() => port.close());
    return;
  }
  last = last.then(() => db.transaction().execute((trx) => apply(trx, req.group))).then(
    (result) => port.postMessage({ id: req.id, ok: true, result } satisfies PushThreadReply),
    (e: unknown) => port.postMessage({ id: req.id, ok: false, error: toWireError(e) } satisfies PushThreadReply));
});
