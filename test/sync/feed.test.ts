import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import WebSocket from 'ws';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { SHARED_STATES, addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest, type TestUser } from '../helpers/sync.js';
import { change, device, tombstone, type PulledChange } from './push-client.js';
import { FEED_DATA_MAX } from '../../src/sync/feed/change-events.js';

interface Feed {
  ws: WebSocket;
  /** The close code, once the socket closes (also when it closed before the feed resolved). */
  closed: Promise<number>;
  /** Resolves with the next `n` change messages, parsed. */
  next(n: number): Promise<unknown[]>;
}

/**
 * Opens the feed and resolves once the server says it is subscribed (its `ready` message, kept out of `next`), or once
 * it closes the socket first; rejects with the HTTP status when the upgrade is refused.
 */
function openFeed(url: string, q: { businessId: string; userId: string; token?: string; via?: 'header' | 'query'; origin?: string }): Promise<Feed> {
  const params = new URLSearchParams({ business_id: q.businessId, user_id: q.userId });
  if (q.token && q.via === 'query') params.set('token', q.token);
  const headers = q.token && q.via !== 'query' ? { authorization: `Bearer ${q.token}` } : undefined;
  const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/sync?${params}`, { ...(headers ? { headers } : {}), ...(q.origin ? { origin: q.origin } : {}) });
  const queue: unknown[] = [];
  const waiters: (() => void)[] = [];
  let ready: () => void = () => undefined;
  ws.on('message', (data) => {
    const message = JSON.parse(String(data)) as { type?: string };
    if (message.type === 'ready') return ready();
    if (message.type === 'heartbeat') return;
    queue.push(message);
    waiters.splice(0).forEach((w) => w());
  });
  const feed: Feed = {
    ws,
    closed: new Promise<number>((r) => ws.once('close', (code) => r(code))),
    async next(n) {
      while (queue.length < n) await new Promise<void>((r) => waiters.push(r));
      return queue.splice(0, n);
    },
  };
  return new Promise((resolve, reject) => {
    ready = () => resolve(feed);
    ws.once('close', () => resolve(feed));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += String(c); });
      res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, body, headers: res.headers })));
    });
    ws.once('error', reject);
  });
}

async function refusal(attempt: () => Promise<Feed>): Promise<{ status: number; body: string; headers: Record<string, string> }> {
  try {
    const f = await attempt();
    f.ws.close();
  } catch (e: unknown) {
    return e as { status: number; body: string; headers: Record<string, string> };
  }
  throw new Error('the upgrade was accepted');
}

/** A WebSocket handshake written by hand with `headers`: what came back, and whether the server ended the connection within 5 s. */
async function refusedHandshake(url: string, path: string, headers: string): Promise<{ text: string; serverEnded: boolean }> {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  let text = '';
  socket.on('data', (c: Buffer) => { text += c.toString('latin1'); });
  const ended = new Promise<boolean>((resolve) => {
    socket.once('end', () => resolve(true));
    setTimeout(() => resolve(false), 5_000).unref();
  });
  socket.write(`GET ${path} HTTP/1.1\r\n${headers}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
  const serverEnded = await ended;
  socket.destroy();
  return { text, serverEnded };
}

/** Replaces `obj[name]` (a method of a running service's stores) with `wrap(original)`; the returned function puts it back. */
function intercept<T extends object, K extends keyof T>(obj: T, name: K, wrap: (original: () => Promise<unknown>) => Promise<unknown>): () => void {
  const original = obj[name] as (...a: unknown[]) => Promise<unknown>;
  obj[name] = ((...a: unknown[]) => wrap(() => original.apply(obj, a))) as T[K];
  return () => { obj[name] = original as T[K]; };
}

/** A business of `boss` with one more member, `leaver`. */
async function ownerAndMember(own: SyncUnderTest) {
  const boss = await newUser(own);
  const b = await newBusiness(own, boss);
  const leaver = await newUser(own);
  await addMember(own, boss, b.id, leaver);
  return { boss, b, leaver };
}

for (const backend of BACKENDS) for (const shared of SHARED_STATES) {
  describe(`sync feed on ${backend}, pub/sub in ${shared}`, () => {
    let s: SyncUnderTest;
    let owner: TestUser;
    let businessId: string;
    const open: WebSocket[] = [];
    before(async () => {
      s = await startSync(backend, {}, { shared });
      owner = await newUser(s);
      businessId = (await newBusiness(s, owner)).id;
    });
    after(async () => {
      for (const ws of open) ws.close();
      await s.close();
    });
    const track = (f: Feed) => { open.push(f.ws); return f; };

    test('the first message is {"type":"ready","heartbeat_ms":...}, once the subscription is in place: a push the moment it arrives reaches the socket', async () => {
      const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws/sync?business_id=${businessId}&user_id=${owner.id}`, { headers: { authorization: `Bearer ${owner.token}` } });
      open.push(ws);
      const raw: string[] = [];
      ws.on('message', (data) => raw.push(String(data)));
      await new Promise<void>((resolve) => { const poll = () => (raw.length ? resolve() : setTimeout(poll, 2)); poll(); });
      assert.deepEqual(raw, ['{"type":"ready","heartbeat_ms":30000}']);
      const rec = randomUUID();
      await device(s.url, owner.token, businessId, 'ready-1').push({ changes: [change(rec, 1)] });
      await new Promise<void>((resolve) => { const poll = () => (raw.length > 1 ? resolve() : setTimeout(poll, 2)); poll(); });
      assert.equal((JSON.parse(raw[1]!) as { record_uuid: string }).record_uuid, rec);
    });

    test('every subscriber of the business gets one change message per applied change, tombstones included', async () => {
      const member = await newUser(s);
      await addMember(s, owner, businessId, member);
      const f1 = track(await openFeed(s.url, { businessId, userId: owner.id, token: owner.token }));
      const f2 = track(await openFeed(s.url, { businessId, userId: member.id, token: member.token }));
      const dev = device(s.url, member.token, businessId, 'ipad-7');
      const a = randomUUID();
      const r = await dev.push({ changes: [change(a, 1, { x: 1 }, 'create', 'invoices')], tombstones: [tombstone(a, 2, 'invoices')] });
      const v = r.body.server_version as number;
      // The change as a pull gives it (less its id and business), data included ({} for the delete).
      const expected = (await dev.pull(v - 2)).body.changes.map(({ id: _id, business_id: _b, ...c }: PulledChange & { business_id: string }) => ({ type: 'change', ...c }));
      assert.deepEqual(expected.map((m: { version: number; operation: string; data: unknown }) => [m.version, m.operation, m.data]), [[v - 1, 'create', { x: 1 }], [v, 'delete', {}]]);
      assert.deepEqual(await f1.next(2), expected);
      assert.deepEqual(await f2.next(2), expected);
    });

    test('a change whose data is larger than 8 KiB of JSON comes without its data (a hint to pull); one just under it with', async () => {
      const f = track(await openFeed(s.url, { businessId, userId: owner.id, token: owner.token }));
      const dev = device(s.url, owner.token, businessId, 'big-1');
      const small = { text: 'a'.repeat(FEED_DATA_MAX - 11) };
      const large = { text: 'b'.repeat(FEED_DATA_MAX - 10) };
      assert.equal(JSON.stringify(small).length, FEED_DATA_MAX);
      await dev.push({ changes: [change(randomUUID(), 1, small), change(randomUUID(), 1, large)] });
      const [m1, m2] = await f.next(2) as Array<Record<string, unknown>>;
      assert.deepEqual(m1!['data'], small);
      assert.equal('data' in m2!, false);
      assert.deepEqual([m2!['operation'], m2!['record_version'], m2!['instance_id']], ['create', 1, 'big-1']);
    });

    test('a conflict sends nothing; resolving it locally sends the applied change', async () => {
      const f = track(await openFeed(s.url, { businessId, userId: owner.id, token: owner.token }));
      const a = device(s.url, owner.token, businessId, 'dev-a');
      const b = device(s.url, owner.token, businessId, 'dev-b');
      const rec = randomUUID();
      const first = await a.push({ changes: [change(rec, 1)] });
      assert.equal(((await f.next(1))[0] as { version: number }).version, first.body.server_version);
      const conflict = (await b.push({ changes: [change(rec, 1, { mine: true })] })).body.conflicts[0];
      const resolved = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: owner.token, headers: { 'x-business-id': businessId }, json: { resolution: 'local' } });
      // Had the conflict produced a message, it would come before this one.
      const [applied] = (await a.pull(resolved.body.applied_version - 1)).body.changes;
      assert.deepEqual(await f.next(1), [{ type: 'change', table_name: 'customers', record_uuid: rec, version: resolved.body.applied_version, instance_id: 'dev-b', operation: applied.operation, record_version: applied.record_version, created_at: applied.created_at, data: { mine: true } }]);
    });

    test('subscribers of another business hear nothing of this one', async () => {
      const other = await newUser(s);
      const otherBusiness = (await newBusiness(s, other)).id;
      const f = track(await openFeed(s.url, { businessId: otherBusiness, userId: other.id, token: other.token }));
      await device(s.url, owner.token, businessId).push({ changes: [change(randomUUID(), 1)] });
      const mine = randomUUID();
      await device(s.url, other.token, otherBusiness).push({ changes: [change(mine, 1)] });
      const [first] = await f.next(1);
      assert.equal((first as { record_uuid: string }).record_uuid, mine);
    });

    test('a token in the query parameter works for browsers and never reaches the logs', async () => {
      const own = await startSync(backend, { logLevel: 'info' }, { shared });
      try {
        const u = await newUser(own);
        const b = await newBusiness(own, u);
        const f = await openFeed(own.url, { businessId: b.id, userId: u.id, token: u.token, via: 'query' });
        const rec = randomUUID();
        await device(own.url, u.token, b.id).push({ changes: [change(rec, 1)] });
        assert.equal(((await f.next(1))[0] as { record_uuid: string }).record_uuid, rec);
        f.ws.close();
        const wrong = `${u.token.slice(0, -4)}abcd`;
        assert.equal((await refusal(() => openFeed(own.url, { businessId: b.id, userId: u.id, token: wrong, via: 'query' }))).status, 401);
        // A path that does not decode is refused quoting the URL: its token redacted there too, in the answer and the log.
        const bad = await call(own.url, 'GET', `/ws/sync%E9?business_id=${b.id}&token=${u.token}`);
        assert.deepEqual([bad.status, bad.body.error], [400, 'invalid_request']);
        assert.ok(bad.body.details.includes('token=[REDACTED]') && !bad.text.includes(u.token.slice(-20)), bad.text);
        const logs = own.logs.join('');
        assert.ok(logs.includes('/ws/sync?'), 'the upgrade requests are logged');
        assert.ok(logs.includes('token=[REDACTED]'));
        assert.ok(!logs.includes(u.token.slice(-20)) && !logs.includes(wrong.slice(-20)), 'the tokens are not');
      } finally {
        await own.close();
      }
    });

    test('the upgrade is refused with 401 without a valid token and 403 for the wrong user or business, 400 for a bad query', async () => {
      const outsider = await newUser(s);
      const otherBusiness = (await newBusiness(s, outsider)).id;
      const tokenOfAnother = await businessToken(s, owner, (await newBusiness(s, owner)).id);
      const cases: [() => Promise<Feed>, number][] = [
        [() => openFeed(s.url, { businessId, userId: owner.id }), 401],
        [() => openFeed(s.url, { businessId, userId: owner.id, token: 'sync_not-a-real-token-123' }), 401],
        [() => openFeed(s.url, { businessId, userId: outsider.id, token: owner.token }), 403],
        [() => openFeed(s.url, { businessId, userId: outsider.id, token: outsider.token }), 403],
        [() => openFeed(s.url, { businessId, userId: owner.id, token: tokenOfAnother }), 403],
        [() => openFeed(s.url, { businessId: otherBusiness, userId: owner.id, token: owner.token }), 403],
        [() => openFeed(s.url, { businessId: randomUUID(), userId: owner.id, token: owner.token }), 403],
        [() => openFeed(s.url, { businessId: 'nope', userId: owner.id, token: owner.token }), 400],
      ];
      for (const [attempt, status] of cases) {
        const r = await refusal(attempt);
        assert.equal(r.status, status, r.body);
        assert.ok(JSON.parse(r.body).error);
        assert.equal(r.headers['x-frame-options'], 'DENY', 'a refused upgrade carries the security headers');
      }
      const ok = track(await openFeed(s.url, { businessId, userId: owner.id, token: await businessToken(s, owner, businessId) }));
      assert.equal(ok.ws.readyState, WebSocket.OPEN, 'a business token of this business is accepted');
      // A plain GET that passes every check is answered in JSON too, not with an empty 404.
      const plain = await call(s.url, 'GET', `/ws/sync?business_id=${businessId}&user_id=${owner.id}`, { token: owner.token });
      assert.deepEqual([plain.status, plain.body.error], [400, 'invalid_request'], plain.text);
      assert.match(plain.body.details, /Upgrade: websocket/);
    });

    test('ready names the heartbeat, and every heartbeat brings {"type":"heartbeat"}: a client can tell a silent connection from a quiet business', async () => {
      const own = await startSync(backend, { feedHeartbeatMs: 100 }, { shared });
      try {
        const u = await newUser(own);
        const b = await newBusiness(own, u);
        const ws = new WebSocket(`${own.url.replace('http', 'ws')}/ws/sync?business_id=${b.id}&user_id=${u.id}`, { headers: { authorization: `Bearer ${u.token}` } });
        const raw: string[] = [];
        ws.on('message', (data) => raw.push(String(data)));
        await new Promise((r) => setTimeout(r, 550));
        ws.close();
        assert.equal(raw[0], '{"type":"ready","heartbeat_ms":100}', 'ready comes first');
        const beats = raw.slice(1);
        assert.ok(beats.length >= 3 && beats.every((m) => m === '{"type":"heartbeat"}'), raw.join(' '));
      } finally {
        await own.close();
      }
    });

    test('a member removed from the business, or whose token is revoked, loses the feed at the next heartbeat (1008)', async () => {
      const own = await startSync(backend, { feedHeartbeatMs: 150 }, { shared });
      try {
        const boss = await newUser(own);
        const b = await newBusiness(own, boss);
        const leaver = await newUser(own);
        const loggedOut = await newUser(own);
        await addMember(own, boss, b.id, leaver);
        await addMember(own, boss, b.id, loggedOut);
        const feeds = await Promise.all([boss, leaver, loggedOut].map((u) => openFeed(own.url, { businessId: b.id, userId: u.id, token: u.token })));
        const closed = feeds.map((f) => f.closed);
        assert.equal((await call(own.url, 'DELETE', `/api/business/${b.id}/members/${leaver.id}`, { token: boss.token })).status, 204);
        assert.equal((await call(own.url, 'POST', '/api/auth/logout', { token: loggedOut.token })).status, 204);
        assert.deepEqual(await Promise.all(closed.slice(1)), [1008, 1008]);
        const r = await device(own.url, boss.token, b.id, 'dev-1').push({ changes: [change(randomUUID(), 1, { still: 'here' })] });
        assert.equal(r.status, 200);
        const [msg] = await feeds[0]!.next(1);
        assert.equal((msg as { type: string }).type, 'change', 'the remaining member keeps the feed');
        feeds[0]!.ws.close();
      } finally {
        await own.close();
      }
    });

    test('a member removed from the business loses the feed at once, not at the next heartbeat, and gets none of the changes made after', async () => {
      const own = await startSync(backend, { feedHeartbeatMs: 3_600_000 }, { shared });
      try {
        const { boss, b, leaver } = await ownerAndMember(own);
        const [bossFeed, leaverFeed] = await Promise.all([boss, leaver].map((u) => openFeed(own.url, { businessId: b.id, userId: u.id, token: u.token })));
        let leaked = 0;
        leaverFeed!.ws.on('message', () => { leaked++; });
        const closed = leaverFeed!.closed;
        assert.equal((await call(own.url, 'DELETE', `/api/business/${b.id}/members/${leaver.id}`, { token: boss.token })).status, 204);
        // Pushed right after the removal's answer, before the feed's re-check can have returned.
        const r = await device(own.url, boss.token, b.id, 'dev-1').push({ changes: [change(randomUUID(), 1, { secret: true })] });
        assert.equal(r.status, 200);
        assert.equal(await closed, 1008, 'closed with policy violation, an hour before the next heartbeat');
        assert.equal(leaked, 0, 'the removed member received no change made after the removal');
        const [msg] = await bossFeed!.next(1);
        assert.equal((msg as { type: string }).type, 'change', 'the owner still gets it');
        bossFeed!.ws.close();
      } finally {
        await own.close();
      }
    });

    for (const how of ['removed from the business', 'signed out'] as const) {
      test(`a change committed right after a member is ${how}, before that is announced, does not reach their feed connection`, async () => {
        const own = await startSync(backend, { feedHeartbeatMs: 3_600_000 }, { shared });
        try {
          const { boss, b, leaver } = await ownerAndMember(own);
          const leaverFeed = await openFeed(own.url, { businessId: b.id, userId: leaver.id, token: leaver.token });
          const got: Array<{ record_uuid?: string }> = [];
          leaverFeed.ws.on('message', (d) => got.push(JSON.parse(String(d)) as { record_uuid?: string }));
          const record = randomUUID();
          // Another member's push commits right after the removal (or the logout's revocation) commits, before the
          // request that made it can announce it: every time, not by chance.
          const pushRightAfter = async (commit: () => Promise<unknown>): Promise<unknown> => {
            const done = await commit();
            const r = await device(own.url, boss.token, b.id, 'boss-dev').push({ changes: [change(record, 1, { secret: 'made after' })] });
            assert.equal(r.status, 200, r.text);
            return done;
          };
          const restore = how === 'signed out'
            ? intercept(own.deps.accounts, 'revokeFamily', pushRightAfter)
            : intercept(own.deps.businesses, 'removeMember', pushRightAfter);
          try {
            const answer = how === 'signed out'
              ? await call(own.url, 'POST', '/api/auth/logout', { token: leaver.token })
              : await call(own.url, 'DELETE', `/api/business/${b.id}/members/${leaver.id}`, { token: boss.token });
            assert.equal(answer.status, 204, answer.text);
          } finally {
            restore();
          }
          assert.equal(await leaverFeed.closed, 1008);
          assert.deepEqual(got.filter((m) => m.record_uuid === record), [], 'the change made after reached the connection');
        } finally {
          await own.close();
        }
      });
    }

    test('a member removed between the upgrade\'s membership check and the subscription has the feed closed (1008) and gets none of the changes made after', async () => {
      const own = await startSync(backend, { feedHeartbeatMs: 3_600_000 }, { shared });
      try {
        const { boss, b, leaver } = await ownerAndMember(own);
        // The removal commits and is answered right after the upgrade's membership read, every time, not by chance.
        const store = own.deps.businesses;
        const roleOf = store.roleOf.bind(store);
        let removalStatus: number | undefined;
        store.roleOf = async (businessId: string, userId: string) => {
          const role = await roleOf(businessId, userId);
          if (removalStatus === undefined && userId === leaver.id) {
            removalStatus = 0;
            removalStatus = (await call(own.url, 'DELETE', `/api/business/${b.id}/members/${leaver.id}`, { token: boss.token })).status;
          }
          return role;
        };
        const feed = await openFeed(own.url, { businessId: b.id, userId: leaver.id, token: leaver.token });
        let leaked = 0;
        feed.ws.on('message', () => { leaked++; });
        const { closed } = feed;
        assert.equal(removalStatus, 204, 'the removal was answered before the feed opened');
        const r = await device(own.url, boss.token, b.id, 'dev-1').push({ changes: [change(randomUUID(), 1, { secret: true })] });
        assert.equal(r.status, 200);
        const code = await Promise.race([closed, new Promise((r) => setTimeout(() => r('still open'), 2000))]);
        feed.ws.close();
        assert.equal(code, 1008, 'closed with policy violation, an hour before the next heartbeat');
        assert.equal(leaked, 0, 'the removed member received no change made after the removal');
      } finally {
        await own.close();
      }
    });

    test('a logout, or a refresh token presented twice, closes the session\'s feed connections at once, not at the next heartbeat', async () => {
      const own = await startSync(backend, { feedHeartbeatMs: 3_600_000 }, { shared });
      try {
        const boss = await newUser(own);
        const b = await newBusiness(own, boss);
        const leaving = await newUser(own);
        const robbed = await newUser(own);
        await addMember(own, boss, b.id, leaving);
        await addMember(own, boss, b.id, robbed);
        const [bossFeed, leavingFeed, robbedFeed] = await Promise.all([boss, leaving, robbed].map((u) => openFeed(own.url, { businessId: b.id, userId: u.id, token: u.token })));
        const closedWith = (f: Feed) => f.closed;
        const [leavingClosed, robbedClosed] = [closedWith(leavingFeed!), closedWith(robbedFeed!)];
        assert.equal((await call(own.url, 'POST', '/api/auth/logout', { token: leaving.token })).status, 204);
        assert.equal(await leavingClosed, 1008, 'closed on logout, an hour before the next heartbeat');
        // A copy of the refresh token used twice: the whole family is revoked, its feed closed with it.
        assert.equal((await call(own.url, 'POST', '/api/auth/refresh', { json: { refresh_token: robbed.refreshToken } })).status, 200);
        assert.equal((await call(own.url, 'POST', '/api/auth/refresh', { json: { refresh_token: robbed.refreshToken } })).status, 401);
        assert.equal(await robbedClosed, 1008, 'closed on the refresh token\'s reuse');
        assert.equal(bossFeed!.ws.readyState, WebSocket.OPEN, 'the others keep theirs');
        bossFeed!.ws.close();
      } finally {
        await own.close();
      }
    });

    test('subscribers are closed with 1001 when the server shuts down', async () => {
      const own = await startSync(backend, {}, { shared });
      const u = await newUser(own);
      const b = await newBusiness(own, u);
      const f = await openFeed(own.url, { businessId: b.id, userId: u.id, token: u.token });
      const { closed } = f;
      await own.close();
      assert.equal(await closed, 1001);
    });

    test('an upgrade that arrives while the server closes is answered 503 and its connection closed, so the close completes', async () => {
      // Holds the close where feed sockets are being closed: the listener still takes connections.
      let release!: () => void;
      let entered!: () => void;
      const inPreClose = new Promise<void>((resolve) => { entered = resolve; });
      const own = await startSync(backend, {}, { shared, extraRoutes: (app) => app.addHook('preClose', async () => { entered(); await new Promise<void>((resolve) => { release = resolve; }); }) });
      const u = await newUser(own);
      const b = await newBusiness(own, u);
      const closing = own.close();
      await inPreClose;
      const { text, serverEnded } = await refusedHandshake(own.url, `/ws/sync?business_id=${b.id}&user_id=${u.id}`, `Host: 127.0.0.1\r\nAuthorization: Bearer ${u.token}`);
      release();
      assert.match(text, /^HTTP\/1\.1 503 /);
      assert.match(text, /"error":"unavailable"/);
      assert.ok(serverEnded, 'the server closed the refused upgrade\'s connection');
      await closing;
    });

    test('an upgrade refused before the feed route sees it (HTTP/1.1 without Host) is answered 400 and its connection closed', async (t) => {
      const own = await startSync(backend, {}, { shared });
      t.after(() => own.close());
      const u = await newUser(own);
      const b = await newBusiness(own, u);
      const { text, serverEnded } = await refusedHandshake(own.url, `/ws/sync?business_id=${b.id}&user_id=${u.id}`, `Authorization: Bearer ${u.token}`);
      assert.ok(serverEnded, 'the server closed the refused upgrade\'s connection');
      assert.match(text, /^HTTP\/1\.1 400 /);
      assert.match(text, /"error":"invalid_request"/);
    });

    test('a browser page from an origin not on --feed-allowed-origins cannot open the feed (403); listed origins and clients without Origin can', async (t) => {
      const own = await startSync(backend, { feedAllowedOrigins: ['https://app.example.com'] });
      t.after(() => own.close());
      const u = await newUser(own);
      const b = await newBusiness(own, u);
      const q = { businessId: b.id, userId: u.id, token: u.token };
      for (const origin of ['https://evil.example', 'null', 'https://app.example.com.evil.example', 'http://app.example.com']) {
        const r = await refusal(() => openFeed(own.url, { ...q, origin }));
        assert.equal(r.status, 403, origin);
        assert.match(r.body, /Origin/);
      }
      (await openFeed(own.url, { ...q, origin: 'https://app.example.com' })).ws.close();
      (await openFeed(own.url, { ...q, origin: 'https://APP.example.com' })).ws.close();
      (await openFeed(own.url, q)).ws.close();
      // The default allows no other site's page; the service's own pages (same host) may.
      const r = await refusal(() => openFeed(s.url, { businessId, userId: owner.id, token: owner.token, origin: 'https://app.example.com' }));
      assert.equal(r.status, 403);
      (await openFeed(s.url, { businessId, userId: owner.id, token: owner.token, origin: s.url })).ws.close();
    });

    test('one user holds at most --feed-max-sockets-per-user feed sockets, even opened all at once', async (t) => {
      const own = await startSync(backend, { feedMaxSocketsPerUser: 3 });
      const sockets: WebSocket[] = [];
      t.after(async () => { for (const ws of sockets) ws.close(); await own.close(); });
      const u = await newUser(own);
      const b = await newBusiness(own, u);
      const q = { businessId: b.id, userId: u.id, token: u.token };
      const attempts = await Promise.allSettled(Array.from({ length: 20 }, () => openFeed(own.url, q)));
      const opened = attempts.flatMap((a) => (a.status === 'fulfilled' ? [a.value.ws] : []));
      sockets.push(...opened);
      // A socket that raced past the HTTP check is closed by the server at once (1008); wait for those closes.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const alive = opened.filter((ws) => ws.readyState === WebSocket.OPEN);
      assert.equal(alive.length, 3, `${alive.length} sockets stayed open`);
      for (const a of attempts) if (a.status === 'rejected') assert.equal((a.reason as { status: number }).status, 429);
      const r = await refusal(() => openFeed(own.url, q));
      assert.equal(r.status, 429);
      assert.match(r.body, /at most 3/);
      const other = await newUser(own);
      await addMember(own, u, b.id, other);
      const fOther = await openFeed(own.url, { businessId: b.id, userId: other.id, token: other.token });
      sockets.push(fOther.ws);
      const closed = new Promise((resolve) => alive[0]!.once('close', resolve));
      alive[0]!.close();
      await closed;
      for (let i = 0; i < 100; i++) {
        const again = await openFeed(own.url, q).catch(() => undefined);
        if (again) { sockets.push(again.ws); return; }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.fail('a freed place was not given back');
    });

    test('without a token the upgrade is 401 even when the query is malformed too', async () => {
      const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws/sync?business_id=nope`);
      const status = await new Promise<number>((resolve, reject) => {
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => reject(new Error('opened')));
        ws.once('error', reject);
      });
      assert.equal(status, 401);
    });
  });
}
