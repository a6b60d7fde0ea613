// Why: builders for the client tests: a signed-in SyncClient on a fresh store, pointed at a real server.
import WebSocket from 'ws';
import { SyncClient, createMemoryStore, type LocalStore, type SyncClientOptions } from '../../src/client/index.js';
import type { StoreOp } from '../../src/client/local-store.js';
import type { TestContext } from 'node:test';
import type { BackendName } from '../helpers/backends.js';
import type { SyncConfig } from '../../src/sync/config.js';
import { addMember, newBusiness, newUser, startSync, type TestUser } from '../helpers/sync.js';

/** A device: a SyncClient signed in as `user` (by login, so each device has its own session) for `businessId`. */
export async function device(url: string, user: Pick<TestUser, 'email' | 'password'>, businessId: string, options: Partial<SyncClientOptions> & { store?: LocalStore } = {}): Promise<SyncClient> {
  const client = await SyncClient.open({
    baseUrl: url,
    businessId,
    store: options.store ?? createMemoryStore(),
    WebSocket: WebSocket as unknown as SyncClientOptions['WebSocket'],
    reconnect: { baseMs: 20, maxMs: 200 },
    retry: { baseMs: 20, maxMs: 200 },
    ...options,
  });
  if (!client.user) await client.login({ email: user.email, password: user.password });
  return client;
}

/**
 * A server on `backend` with one user and a business of theirs, and `open` for a device of that user in that
 * business; the server and every device are closed after the test.
 */
export async function oneBusiness(t: TestContext, backend: BackendName) {
  const s = await startSync(backend);
  t.after(() => s.close());
  const u = await newUser(s);
  const b = await newBusiness(s, u);
  const open = async (options: Partial<SyncClientOptions> & { store?: LocalStore } = {}): Promise<SyncClient> => {
    const client = await device(s.url, u, b.id, options);
    t.after(() => client.close());
    return client;
  };
  return { s, u, b, open };
}

/** A server on `backend` (with `overrides`) with a business of `owner` that `member` belongs to as well; the server is closed after the test. */
export async function ownerAndMember(t: TestContext, backend: BackendName, overrides: Partial<SyncConfig> = {}) {
  const s = await startSync(backend, overrides);
  t.after(() => s.close());
  const owner = await newUser(s);
  const member = await newUser(s);
  const b = await newBusiness(s, owner);
  await addMember(s, owner, b.id, member);
  return { s, owner, member, b };
}

/** Resolves when `predicate` holds, checking every 10 ms; fails after `ms`. */
export async function until(predicate: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A switchable network for one device: while `offline`, every request fails as a dropped connection would. */
export class Network {
  offline = false;
  /** Requests seen, by path (to count refreshes, pushes...). */
  readonly calls: string[] = [];
  readonly fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    this.calls.push(url.pathname);
    if (this.offline) return Promise.reject(new TypeError('fetch failed (offline)'));
    return fetch(input, init);
  };

  count(path: string): number {
    return this.calls.filter((p) => p === path).length;
  }
}

/** `inner` with its writes refused as a browser refuses one over its quota, when `refuse(ops)` says so. */
export function refusingStore(inner: LocalStore, refuse: (ops: readonly StoreOp[]) => boolean): LocalStore {
  return {
    ...inner,
    write: async (ops, options) => {
      if (refuse(ops)) throw Object.assign(new Error('QuotaExceededError: the quota has been exceeded'), { name: 'QuotaExceededError' });
      return inner.write(ops, options);
    },
  };
}
