// Why: the sync engine keeps its state behind one small interface so memory, SQLite and IndexedDB stores are interchangeable.
import type { Conflict, Operation } from './wire.js';
import { SyncClientError } from './errors.js';

export type RecordData = Record<string, unknown>;

/** One record as this device knows it. */
export interface LocalRecord {
  table: string;
  uuid: string;
  /** What the app sees; null once deleted. */
  data: RecordData | null;
  /** Record version of `data` (create = 1, each change +1), in the server's numbering. */
  version: number;
  /** The latest state the server is known to hold (from a pull or an accepted push); version 0 when never synced. */
  remote: { data: RecordData | null; version: number; instanceId: string; at: string } ;
  /** The server state the first pending local edit started from; a field merge compares both sides with it. */
  base: RecordData | null;
  /**
   * Set on every record when the server's history turned out to differ from what this device pulled (a restore from
   * a backup), cleared as the pull from version 0 brings the record again; a record still marked when that pull ends
   * is not on the server.
   */
  stale?: true;
}

/** A local change waiting for the server. */
export interface OutboxEntry {
  /** Order of the local writes; pushes follow it. */
  seq: number;
  table: string;
  uuid: string;
  version: number;
  operation: Operation;
  data: RecordData | null;
  /**
   * Set durably before the entry first leaves the device. A sent entry is frozen
   * (a retry must repeat it byte for byte so the server recognises it); an unsent
   * one absorbs later edits of its record.
   */
  sent: boolean;
  /** The device clock at the last edit (epoch ms), for last-writer-wins. */
  editedAt: number;
}

/** A conflict the server reported for one of this device's pushes, with the entry it came from. */
export interface LocalConflict {
  conflict: Conflict;
  entry: OutboxEntry;
}

export interface Collections {
  records: LocalRecord;
  outbox: OutboxEntry;
  conflicts: LocalConflict;
  meta: unknown;
}
export type CollectionName = keyof Collections;

export type StoreOp =
  | { [C in CollectionName]: { op: 'put'; collection: C; key: string; value: Collections[C] } }[CollectionName]
  | { op: 'delete'; collection: CollectionName; key: string };

/** How `write` commits. */
export interface WriteOptions {
  /**
   * For what the server can send again (pulled pages): the write is atomic and
   * survives a crash of the app, but a power failure may undo it, whole. The
   * client then pulls it again from the cursor undone with it. Other writes
   * are durable when they resolve.
   */
  relaxed?: boolean;
}

/**
 * Storage of the sync client: four keyed collections. Every method is atomic;
 * `write` applies all its operations in one transaction and resolves once they
 * are durable, which is what makes the outbox survive a crash or a closed tab.
 * One client instance per store at a time, which `claim` enforces: a client
 * keeps its outbox numbering, conflicts and session in memory, so a second
 * client of the same data (a second tab on one IndexedDB database) would
 * overwrite the first one's queued changes.
 */
export interface LocalStore {
  get<C extends CollectionName>(collection: C, key: string): Promise<Collections[C] | undefined>;
  /** Several values in one read, in the order of `keys` (undefined where absent): a pulled page reads its records at once. */
  getMany<C extends CollectionName>(collection: C, keys: readonly string[]): Promise<(Collections[C] | undefined)[]>;
  /** Every value of the collection, by ascending key; only keys starting with `prefix` when given. */
  list<C extends CollectionName>(collection: C, prefix?: string): Promise<Collections[C][]>;
  write(ops: readonly StoreOp[], options?: WriteOptions): Promise<void>;
  /**
   * Takes the store for the calling client until `close`; rejects with a `store_in_use` SyncClientError while
   * another client (in this process, another tab, another process) holds it. SyncClient.open calls it first.
   */
  claim(): Promise<void>;
  /** Releases the claim and the underlying database (the data stays). */
  close(): Promise<void>;
}

/** Key of a record: table, NUL, uuid (NUL cannot occur in either), so one table's records share a prefix. */
export function recordKey(table: string, uuid: string): string {
  return `${table}\u0000${uuid}`;
}

/** Outbox keys sort in `seq` order as strings. */
export function outboxKey(seq: number): string {
  return String(seq).padStart(16, '0');
}

export function conflictKey(id: number): string {
  return String(id).padStart(16, '0');
}

/**
 * `store` with every failure of its reads and writes as a `local_store` SyncClientError (the store's own error as
 * `cause`), so an app branches on one code for the device's storage, whichever store it chose.
 */
export function withStoreErrors(store: LocalStore): LocalStore {
  const wrap = <A extends unknown[], R>(fn: (...args: A) => Promise<R>) => async (...args: A): Promise<R> => {
    try {
      return await fn(...args);
    } catch (e: unknown) {
      if (e instanceof SyncClientError) throw e;
      throw new SyncClientError('local_store', `the local store failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  };
  return {
    get: wrap(store.get.bind(store)) as LocalStore['get'],
    getMany: wrap(store.getMany.bind(store)) as LocalStore['getMany'],
    list: wrap(store.list.bind(store)) as LocalStore['list'],
    write: wrap(store.write.bind(store)),
    claim: () => store.claim(),
    close: () => store.close(),
  };
}
