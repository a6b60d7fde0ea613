// Why: builders for the client tests: a signed-in SyncClient on a fresh store, pointed at a real server.
import WebSocket from 'ws';
import { SyncClient, createMemoryStore, type LocalStore, type SyncClientOptions } from '../../src/client/index.js';
import type { TestUser } from '../helpers/sync.js';

/** A device: a SyncClient signed in as `user` (by login, so each device has its own session) for `businessId`. */
export async function device(url: string, user: TestUser, businessId: string, options: Partial<SyncClientOptions> & { store?: LocalStore } = {}): Promise<SyncClient> {
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
