// Why: a store for tests, demos and apps that keep nothing across restarts.
import { storeInUse } from './errors.js';
import type { CollectionName, Collections, LocalStore, StoreOp } from './local-store.js';

/** Keeps everything in memory; values are copied in and out so callers cannot alter stored state by reference. */
export function createMemoryStore(): LocalStore {
  const maps: { [C in CollectionName]: Map<string, Collections[C]> } = { records: new Map(), outbox: new Map(), conflicts: new Map(), meta: new Map() };
  let claimed = false;
  return {
    async get(collection, key) {
      const v = maps[collection].get(key);
      return v === undefined ? undefined : structuredClone(v) as never;
    },
    async getMany(collection, keys) {
      return keys.map((k) => {
        const v = maps[collection].get(k);
        return v === undefined ? undefined : structuredClone(v);
      }) as never;
    },
    async list(collection, prefix = '') {
      const map = maps[collection] as Map<string, unknown>;
      return [...map.keys()].filter((k) => k.startsWith(prefix)).sort().map((k) => structuredClone(map.get(k))) as never;
    },
    async write(ops: readonly StoreOp[]) {
      // Copied first, so a value that cannot be copied fails the write before any of it is applied.
      const values = ops.map((o) => (o.op === 'put' ? structuredClone(o.value) : undefined));
      ops.forEach((o, i) => {
        const map = maps[o.collection] as Map<string, unknown>;
        if (o.op === 'put') map.set(o.key, values[i]);
        else map.delete(o.key);
      });
    },
    async claim() {
      if (claimed) throw storeInUse('this memory store');
      claimed = true;
    },
    async close() {
      claimed = false;
    },
  };
}
