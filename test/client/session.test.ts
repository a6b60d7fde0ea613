import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { addMember, newBusiness, newUser, startSync } from '../helpers/sync.js';
import { SyncClient, SyncClientError, createMemoryStore, type LocalStore, type SyncClientOptions } from '../../src/client/index.js';
import { device, Network, oneBusiness, until } from './client-fixtures.js';

const MINUTE = 60_000;

/** A fetch that holds the answer of the next request to `path` (armed by `arm`) until `release`; it reaches the server. */
function gatedFetch(path: string) {
  let release!: () => void;
  let arrived!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  const reached = new Promise<void>((r) => { arrived = r; });
  let armed = false;
  const seen: Array<{ path: string; auth: string | null; reply: unknown }> = [];
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const res = await fetch(input, init);
    const text = await res.clone().text();
    let reply: unknown;
    try { reply = JSON.parse(text); } catch { reply = text; }
    seen.push({ path: url.pathname, auth: new Headers(init?.headers).get('authorization'), reply });
    if (armed && url.pathname === path) { armed = false; arrived(); await gate; }
    return res;
  };
  return { fetch: f, arm: () => { armed = true; }, release: () => release(), reached, seen };
}

const switched = (e: unknown) => e instanceof SyncClientError && e.code === 'not_signed_in';

describe('sync client: sessions, limits and errors', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: concurrent calls that meet an expired token share one refresh, and all succeed`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const net = new Network();
      const a = await device(s.url, u, b.id, { fetch: net.fetch });
      t.after(() => a.close());
      await a.put('customers', randomUUID(), { name: 'Ann' });
      await a.sync();

      // The server's clock passes the 15-minute access lifetime; the client's clock does not, so it learns from 401s.
      s.clock.advance(16 * MINUTE);
      const answers = await Promise.all(Array.from({ length: 12 }, () => a.status()));
      assert.ok(answers.every((st) => st.server_version === 1));
      assert.equal(net.count('/api/auth/refresh'), 1, 'one refresh for all the waiting calls (a second would revoke the family)');
      // The refresh rotated the tokens and the family is intact: more calls work.
      await a.sync();
      assert.equal(net.count('/api/auth/refresh'), 1);
    });

    test(`on ${backend}: a device clock 20 minutes off the server's, ahead or behind: tokens are renewed by their lifetime on the device's own clock, not before every call, and never sent lapsed`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      for (const skew of [20 * MINUTE, -20 * MINUTE]) {
        const net = new Network();
        const statuses: number[] = [];
        const recording = async (input: string | URL | Request, init?: RequestInit) => {
          const r = await net.fetch(input, init);
          statuses.push(r.status);
          return r;
        };
        let elapsed = 0;
        const a = await device(s.url, u, b.id, { fetch: recording, now: () => Date.now() + skew + elapsed });
        t.after(() => a.close());
        for (let i = 0; i < 5; i++) {
          await a.put('customers', randomUUID(), { i });
          await a.sync();
        }
        assert.equal(net.count('/api/auth/refresh'), 0, `skew ${skew}: no refresh while the token lives (by expires_at against the device clock, one before every call)`);
        assert.equal(net.count('/api/auth/token'), 1, `skew ${skew}: one business token`);
        // 16 minutes pass on both clocks: the device renews before its next call, instead of learning from a 401.
        s.clock.advance(16 * MINUTE);
        elapsed += 16 * MINUTE;
        await a.sync();
        assert.equal(net.count('/api/auth/refresh'), 1, `skew ${skew}`);
        assert.equal(net.count('/api/auth/token'), 2, `skew ${skew}`);
        assert.deepEqual(statuses.filter((st) => st === 401), [], `skew ${skew}: no token sent after it lapsed`);
      }
    });

    test(`on ${backend}: a login whose connection failed before the server read it (a pooled one it had just closed) is sent again; a register is not`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      let failNext = 0;
      const fetchOnce = (input: string | URL | Request, init?: RequestInit) => {
        if (failNext > 0) { failNext--; return Promise.reject(new TypeError('fetch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })); }
        return fetch(input, init);
      };
      const c = await SyncClient.open({ baseUrl: s.url, businessId: b.id, store: createMemoryStore(), fetch: fetchOnce });
      t.after(() => c.close());
      failNext = 1;
      const user = await c.login({ email: u.email, password: u.password });
      assert.equal(user.id, u.id, 'signed in on the second attempt');
      failNext = 1;
      await assert.rejects(c.register({ email: `x-${randomUUID()}@example.com`, name: 'X', password: 'long enough password 1' }),
        (e: unknown) => e instanceof SyncClientError && e.code === 'network', 'a register is never sent twice');
    });

    test(`on ${backend}: a token about to expire is refreshed before the request, not after a 401`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const net = new Network();
      let skew = 0;
      const a = await device(s.url, u, b.id, { fetch: net.fetch, now: () => Date.now() + skew });
      t.after(() => a.close());
      await a.status();
      net.calls.length = 0;
      skew = 14.7 * MINUTE; // within the 30 s refresh margin of both tokens
      await a.status();
      assert.deepEqual(net.calls, ['/api/auth/refresh', '/api/auth/token', '/api/sync/status']);
    });

    test(`on ${backend}: a refused refresh signals onSessionExpired once and fails calls with session_expired`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const store = createMemoryStore();
      const net = new Network();
      let signalled = 0;
      const a = await device(s.url, u, b.id, { fetch: net.fetch, store, onSessionExpired: () => { signalled++; } });
      t.after(() => a.close());
      await a.status();
      // Someone else spends the device's refresh token: the device's next refresh is a reuse and revokes the family.
      const saved = (await store.get('meta', 'session')) as { refreshToken: string };
      assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: saved.refreshToken } })).status, 200);
      s.clock.advance(16 * MINUTE);
      let expired = 0;
      a.on('sessionExpired', () => { expired++; });
      const results = await Promise.allSettled([a.status(), a.status(), a.sync()]);
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        assert.ok(r.reason instanceof SyncClientError);
        assert.equal(r.reason.code, 'session_expired');
      }
      await assert.rejects(a.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'session_expired', 'and so does a later call');
      assert.equal(expired, 1);
      assert.equal(signalled, 1, 'the onSessionExpired option is called too');
      assert.equal(net.count('/api/auth/refresh'), 1);
      assert.equal(a.user, undefined);
      assert.equal(await store.get('meta', 'session'), undefined, 'the dead session is forgotten');
    });

    test(`on ${backend}: a 429 is waited out for retry_after seconds, then the call succeeds`, async (t) => {
      const s = await startSync(backend, { userRateLimit: 6 });
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const waits: number[] = [];
      // The client's wait moves the server's clock, so the test does not sleep a minute.
      const a = await device(s.url, u, b.id, { sleep: async (ms) => { waits.push(ms); s.clock.advance(ms); } });
      t.after(() => a.close());
      for (let i = 0; i < 8; i++) await a.status();
      assert.equal(waits.length, 1);
      assert.ok(waits[0]! > 0 && waits[0]! <= 60_000, String(waits[0]));
    });

    test(`on ${backend}: close() cuts short a round waiting out a 429: the round rejects with closed and close() does not wait`, async (t) => {
      const s = await startSync(backend, { userRateLimit: 6 });
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const order: string[] = [];
      let timer: ReturnType<typeof setTimeout> | undefined;
      t.after(() => clearTimeout(timer));
      let waiting!: () => void;
      const waited = new Promise<void>((resolve) => { waiting = resolve; });
      // The wait ends well after close() would if it cut the wait short; a close() that waited resolves after 'wait over'.
      const a = await device(s.url, u, b.id, {
        sleep: (ms) => new Promise<void>((resolve) => {
          waiting();
          timer = setTimeout(() => { order.push('wait over'); s.clock.advance(ms); resolve(); }, 10_000);
        }),
      });
      t.after(() => a.close());
      let closing = false;
      const rounds = (async () => { while (!closing) await a.sync(); })();
      await waited;
      closing = true;
      await a.close();
      order.push('closed');
      await assert.rejects(rounds, (e: unknown) => e instanceof SyncClientError && e.code === 'closed');
      assert.deepEqual(order, ['closed']);
    });

    test(`on ${backend}: errors are typed with the server's code and status`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const outsider = await newUser(s);
      const b = await newBusiness(s, u);
      const a = await device(s.url, outsider, b.id);
      t.after(() => a.close());
      await assert.rejects(a.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'forbidden' && e.status === 403);
      const ghost = await device(s.url, u, randomUUID());
      t.after(() => ghost.close());
      await assert.rejects(ghost.status(), (e: unknown) => e instanceof SyncClientError && e.code === 'not_found' && e.status === 404);
      const fresh = await SyncClient.open({ baseUrl: s.url, store: createMemoryStore() });
      await assert.rejects(fresh.login({ email: u.email, password: 'wrong password!' }), (e: unknown) => e instanceof SyncClientError && e.code === 'unauthorized' && e.status === 401);
      await assert.rejects(fresh.register({ email: u.email, name: 'Again', password: 'long enough password' }), (e: unknown) => e instanceof SyncClientError && e.code === 'conflict' && e.status === 409);
      await assert.rejects(fresh.register({ email: 'not-an-email', name: 'X', password: 'long enough password' }), (e: unknown) => e instanceof SyncClientError && e.code === 'invalid_request' && typeof e.details === 'string');
      await assert.rejects(fresh.status(), (e: unknown) => e instanceof SyncClientError && e.code === 'invalid_request');
      await assert.rejects(fresh.put('bad table!', randomUUID(), {}), (e: unknown) => e instanceof SyncClientError && e.code === 'invalid_request');
    });

    describe(`on ${backend}: a new sign-in (after a logout, or over a session) while a call of the previous session is on its way`, () => {
      /** A server, a user of a business, and a client signed in on a store of its own; `g` holds answers of one path. */
      async function signedIn(t: TestContext, fetchPath: string, extra: Partial<SyncClientOptions> = {}) {
        const s = await startSync(backend);
        t.after(() => s.close());
        const u = await newUser(s);
        const biz = await newBusiness(s, u);
        const g = gatedFetch(fetchPath);
        const clock = { skew: 0 };
        const store = createMemoryStore();
        const c = await SyncClient.open({ baseUrl: s.url, businessId: biz.id, store, fetch: g.fetch, now: () => Date.now() + clock.skew, ...extra });
        t.after(() => c.close());
        await c.login({ email: u.email, password: u.password });
        return { s, u, g, clock, store, c };
      }
      /** The access token of the last login's answer, and the one the store holds now. */
      const lastLogin = (g: ReturnType<typeof gatedFetch>) => (g.seen.filter((x) => x.path === '/api/auth/login').at(-1)!.reply as { token: string }).token;
      const stored = async (store: LocalStore) => ((await store.get('meta', 'session')) as { token: string } | undefined)?.token;

      test('a refresh of the previous session answered after the new sign-in does not replace the new session', async (t) => {
        const { u, g, clock, store, c } = await signedIn(t, '/api/auth/refresh');
        await c.status();
        // The tokens near their expiry on the device's clock: the next call refreshes first.
        clock.skew = 14.9 * MINUTE;
        g.arm();
        const pending = c.status().catch((e: unknown) => e);
        await g.reached;
        clock.skew = 0;
        await c.login({ email: u.email, password: u.password });
        g.release();
        assert.ok(switched(await pending), 'the previous session\'s call fails, not sent again under the new one');
        assert.equal(await stored(store), lastLogin(g), 'the stored session is the new sign-in\'s');
        await c.status();
      });

      test('a refresh of the previous session refused after the new sign-in ends nothing: no session expiry, the new session stays', async (t) => {
        let expired = 0;
        const { s, u, g, clock, store, c } = await signedIn(t, '/api/auth/refresh', { onSessionExpired: () => { expired++; } });
        await c.status();
        // The refresh token was spent elsewhere first: this refresh will be refused.
        const spent = (await store.get('meta', 'session')) as { refreshToken: string };
        assert.equal((await call(s.url, 'POST', '/api/auth/refresh', { json: { refresh_token: spent.refreshToken } })).status, 200);
        clock.skew = 14.9 * MINUTE;
        g.arm();
        const pending = c.status().catch((e: unknown) => e);
        await g.reached;
        clock.skew = 0;
        await c.login({ email: u.email, password: u.password });
        g.release();
        assert.ok(switched(await pending));
        assert.equal(expired, 0);
        assert.equal(c.user?.id, u.id);
        assert.equal(await stored(store), lastLogin(g), 'the new session was not deleted');
        await c.status();
      });

      test('a business token asked for under the previous session and answered after the new sign-in is not used by the new one', async (t) => {
        const { u, g, c } = await signedIn(t, '/api/auth/token');
        g.arm();
        const pending = c.status().catch((e: unknown) => e);
        await g.reached;
        await c.login({ email: u.email, password: u.password });
        g.release();
        assert.ok(switched(await pending));
        await c.put('customers', randomUUID(), { name: 'after' });
        await c.sync();
        const asked = g.seen.filter((x) => x.path === '/api/auth/token' && x.auth === `Bearer ${lastLogin(g)}`).map((x) => `Bearer ${(x.reply as { token: string }).token}`);
        const push = g.seen.find((x) => x.path === '/api/sync/push')!;
        assert.ok(asked.includes(push.auth!), 'the push went out with a business token asked for with the new session\'s token');
      });

      test('a logout answered after the new sign-in leaves the new session signed in', async (t) => {
        const { u, g, store, c } = await signedIn(t, '/api/auth/logout');
        g.arm();
        const out = c.logout();
        await g.reached;
        await c.login({ email: u.email, password: u.password });
        g.release();
        await out;
        assert.equal(c.user?.id, u.id);
        assert.equal(await stored(store), lastLogin(g));
        await c.status();
      });
    });

    test(`on ${backend}: a store that holds user A's data refuses a sign-in as user B (one store per user): A's records and queued edits are neither shown to B nor pushed as B`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const a = await newUser(s);
      const b = await newUser(s);
      const biz = await newBusiness(s, a);
      await addMember(s, a, biz.id, b);
      const store = createMemoryStore();
      const c = await device(s.url, a, biz.id, { store });
      t.after(() => c.close());
      const synced = randomUUID();
      await c.put('notes', synced, { text: 'synced by A' });
      await c.sync();
      const queued = randomUUID();
      await c.put('notes', queued, { text: 'queued by A' });
      await c.logout();
      await assert.rejects(c.login({ email: b.email, password: b.password }), (e: unknown) => e instanceof SyncClientError && e.code === 'invalid_request' && /another user/.test(e.message));
      assert.equal(c.user, undefined, 'B is not signed in on this store');
      await assert.rejects(c.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'not_signed_in');
      assert.equal((await call(s.url, 'POST', '/api/sync/pull', { token: a.token, headers: { 'x-business-id': biz.id }, json: { business_id: biz.id, since_version: 0 } })).body.changes.length, 1, 'the queued edit was not pushed');
      // A carries on where they left off; B works on a store of their own.
      await c.login({ email: a.email, password: a.password });
      await c.sync();
      assert.equal(c.pendingChanges, 0);
      const own = await device(s.url, b, biz.id);
      t.after(() => own.close());
      await own.sync();
      assert.deepEqual(await own.get('notes', queued), { text: 'queued by A' });
      assert.deepEqual(await own.get('notes', synced), { text: 'synced by A' });
    });

    test(`on ${backend}: register, business creation, logout; after logout the tokens are revoked on the server`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const store = createMemoryStore();
      const a = await SyncClient.open({ baseUrl: s.url, store });
      const user = await a.register({ email: `c-${randomUUID()}@example.com`, name: 'Client', password: 'long enough password' });
      assert.equal(a.user?.id, user.id);
      const biz = await a.createBusiness({ name: 'Client Pty Ltd', abn: '51824753556' });
      assert.deepEqual((await a.listBusinesses()).map((x) => x.id), [biz.id]);
      await a.useBusiness(biz.id);
      await a.put('customers', randomUUID(), { name: 'Ann' });
      await a.sync();
      const saved = (await store.get('meta', 'session')) as { token: string };
      await a.logout();
      assert.equal(a.user, undefined);
      assert.equal((await call(s.url, 'GET', '/api/business', { token: saved.token })).status, 401);
      await a.close();
    });
  }
});

test('a background sync the server answers 503 with retry_after asks again only after that wait, not after its backoff', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const pulls: number[] = [];
  let pushesRefused = 0;
  let refuseNext = false;
  const refuse = (wait: number) => Promise.resolve(new Response(JSON.stringify({ error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: wait }),
    { status: 503, headers: { 'content-type': 'application/json', 'retry-after': String(wait) } }));
  const fetchWith503 = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    if (url.pathname === '/api/sync/pull') {
      pulls.push(performance.now());
      if (pulls.length === 1) return refuse(1);
    }
    // With the feed connected a local write's round pushes without pulling first.
    if (url.pathname === '/api/sync/push' && refuseNext && pushesRefused === 0) {
      pushesRefused++;
      return refuse(30);
    }
    return fetch(input, init);
  };
  // The fixture's backoff starts at 20 ms: without retry_after the second pull would follow within 200 ms.
  const a = await open({ fetch: fetchWith503 });
  const errors: SyncClientError[] = [];
  a.on('error', (e) => errors.push(e));
  a.start();
  await until(() => a.syncState === 'up-to-date' && pulls.length >= 2, 10_000, 'the retried pull');
  assert.deepEqual(errors.map((e) => [e.code, e.retryAfter]), [['unavailable', 1]]);
  assert.ok(pulls[1]! - pulls[0]! >= 995, `asked again after ${Math.round(pulls[1]! - pulls[0]!)} ms`);

  // Told to wait 30 s, the client is stopped and started again by the app: that start syncs at once.
  refuseNext = true;
  await a.put('customers', randomUUID(), { name: 'Ann' });
  await until(() => pushesRefused === 1, 10_000, 'the second refusal');
  const before = pulls.length;
  a.stop();
  a.start();
  await until(() => a.syncState === 'up-to-date' && pulls.length > before && a.pendingChanges === 0, 5_000, 'a round right after start()');
});
