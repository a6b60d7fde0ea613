// Why: the durable store of the browser; a queued change survives a closed tab because it is committed to IndexedDB before the write resolves.
import { storeInUse } from './errors.js';
import type { CollectionName, Collections, LocalStore, StoreOp, WriteOptions } from './local-store.js';

const COLLECTIONS: readonly CollectionName[] = ['records', 'outbox', 'conflicts', 'meta'];

// The slice of the IndexedDB API used here, typed locally: the project compiles without the DOM library (it would retype Node's globals).
interface Req<T> { result: T; error: Error | null; onsuccess: (() => void) | null; onerror: (() => void) | null }
interface ObjectStore { get(key: string): Req<unknown>; getAll(range?: unknown): Req<unknown[]>; put(value: unknown, key: string): Req<unknown>; delete(key: string): Req<unknown> }
interface Tx { objectStore(name: string): ObjectStore; abort(): void; oncomplete: (() => void) | null; onerror: (() => void) | null; onabort: (() => void) | null; error: Error | null }
interface Db {
  objectStoreNames: { contains(name: string): boolean };
  createObjectStore(name: string): unknown;
  transaction(stores: string[], mode: 'readonly' | 'readwrite', options?: { durability: 'strict' | 'relaxed' | 'default' }): Tx;
  close(): void;
}
interface OpenReq extends Req<Db> { onupgradeneeded: (() => void) | null }
export interface IdbFactory { open(name: string, version: number): OpenReq }
interface KeyRangeStatic { bound(lower: string, upper: string): unknown }
/** The Web Locks API (navigator.locks): shared by every tab and worker of the origin. */
export interface LockManagerLike { request(name: string, options: { ifAvailable: true }, callback: (lock: unknown) => Promise<void> | undefined): Promise<unknown> }

/**
 * Holds the Web Lock `name` until the returned release is called; rejects with `store_in_use` while another tab
 * holds it. Without Web Locks (a page served over plain HTTP from another host than localhost), only clients of
 * this page are kept apart.
 */
async function holdLock(locks: LockManagerLike, name: string, store: string): Promise<() => void> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  const granted = await new Promise<boolean>((resolve, reject) => {
    locks.request(name, { ifAvailable: true }, (lock) => {
      resolve(lock !== null);
      return lock === null ? undefined : held;
    }).catch(reject);
  });
  if (!granted) throw storeInUse(`the IndexedDB store ${store}`);
  return release;
}

/**
 * Opens (creating on first use) the IndexedDB database `name`, one object store per collection. `claim` takes the
 * Web Lock `fleetsync-client:<name>`, so a second tab of the app is refused rather than overwriting the first's outbox.
 */
export async function createIndexedDbStore(
  name: string,
  factory: IdbFactory = (globalThis as unknown as { indexedDB: IdbFactory }).indexedDB,
  locks: LockManagerLike | undefined = (globalThis as unknown as { navigator?: { locks?: LockManagerLike } }).navigator?.locks,
): Promise<LocalStore> {
  const db = await new Promise<Db>((resolve, reject) => {
    const open = factory.open(name, 1);
    open.onupgradeneeded = () => {
      for (const c of COLLECTIONS) if (!open.result.objectStoreNames.contains(c)) open.result.createObjectStore(c);
    };
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error ?? new Error(`cannot open IndexedDB ${name}`));
  });

  function run<T>(stores: CollectionName[], mode: 'readonly' | 'readwrite', body: (tx: Tx) => Req<T> | undefined, durability: 'strict' | 'relaxed' = 'strict'): Promise<T | undefined> {
    return new Promise((resolve, reject) => {
      // "strict" asks the browser to flush to disk before completing (Chromium otherwise reports success earlier).
      const tx = db.transaction(stores, mode, { durability });
      let req: Req<T> | undefined;
      try {
        req = body(tx);
      } catch (e: unknown) {
        // A request the browser refuses at once (a value it cannot clone): the ones issued before it would commit when
        // the transaction ends, so it is aborted; the write applies all of its operations or none.
        tx.abort();
        reject(e);
        return;
      }
      tx.oncomplete = () => resolve(req?.result);
      tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'));
      tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
    });
  }

  let claimed = false;
  let release: (() => void) | null = null;
  return {
    async get<C extends CollectionName>(collection: C, key: string) {
      return (await run([collection], 'readonly', (tx) => tx.objectStore(collection).get(key))) as Collections[C] | undefined;
    },
    async getMany<C extends CollectionName>(collection: C, keys: readonly string[]) {
      const requests: Req<unknown>[] = [];
      await run([collection], 'readonly', (tx) => {
        const store = tx.objectStore(collection);
        for (const k of keys) requests.push(store.get(k));
        return undefined;
      });
      return requests.map((r) => r.result as Collections[C] | undefined);
    },
    async list<C extends CollectionName>(collection: C, prefix = '') {
      const KeyRange = (globalThis as unknown as { IDBKeyRange: KeyRangeStatic }).IDBKeyRange;
      const range = prefix ? KeyRange.bound(prefix, `${prefix}\uffff`) : undefined;
      return ((await run([collection], 'readonly', (tx) => tx.objectStore(collection).getAll(range))) ?? []) as Collections[C][];
    },
    async write(ops: readonly StoreOp[], options?: WriteOptions) {
      if (!ops.length) return;
      const stores = [...new Set(ops.map((o) => o.collection))];
      await run(stores, 'readwrite', (tx) => {
        for (const o of ops) {
          if (o.op === 'put') tx.objectStore(o.collection).put(o.value, o.key);
          else tx.objectStore(o.collection).delete(o.key);
        }
        return undefined;
      }, options?.relaxed ? 'relaxed' : 'strict');
    },
    async claim() {
      if (claimed) throw storeInUse(`the IndexedDB store ${name}`);
      claimed = true;
      try {
        if (locks) release = await holdLock(locks, `fleetsync-client:${name}`, name);
      } catch (e: unknown) {
        claimed = false;
        throw e;
      }
    },
    async close() {
      release?.();
      release = null;
      claimed = false;
      db.close();
    },
  };
}
