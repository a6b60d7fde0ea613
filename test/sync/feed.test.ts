import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { SHARED_STATES, addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest, type TestUser } from '../helpers/sync.js';
import { change, device, tombstone } from './push-client.js';

interface Feed {
  ws: WebSocket;
  /** Resolves with the next `n` messages, parsed. */
  next(n: number): Promise<unknown[]>;
}

/** Opens the feed; rejects with the HTTP status when the upgrade is refused. */
function openFeed(url: string, q: { businessId: string; userId: string; token?: string; via?: 'header' | 'query' }): Promise<Feed> {
  const params = new URLSearchParams({ business_id: q.businessId, user_id: q.userId });
  if (q.token && q.via === 'query') params.set('token', q.token);
  const headers = q.token && q.via !== 'query' ? { authorization: `Bearer ${q.token}` } : undefined;
  const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/sync?${params}`, headers ? { headers } : {});
  const queue: unknown[] = [];
  const waiters: (() => void)[] = [];
  ws.on('message', (data) => {
    queue.push(JSON.parse(String(data)));
    waiters.splice(0).forEach((w) => w());
  });
  const feed: Feed = {
    ws,
    async next(n) {
      while (queue.length < n) await new Promise<void>((r) => waiters.push(r));
      return queue.splice(0, n);
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(feed));
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

    test('every subscriber of the business gets one change message per applied change, tombstones included', async () => {
      const member = await newUser(s);
      await addMember(s, owner, businessId, member);
      const f1 = track(await openFeed(s.url, { businessId, userId: owner.id, token: owner.token }));
      const f2 = track(await openFeed(s.url, { businessId, userId: member.id, token: member.token }));
      const dev = device(s.url, member.token, businessId, 'ipad-7');
      const a = randomUUID();
      const r = await dev.push({ changes: [change(a, 1, { x: 1 }, 'create', 'invoices')], tombstones: [tombstone(a, 2, 'invoices')] });
      const v = r.body.server_version as number;
      const expected = [
        { type: 'change', table_name: 'invoices', record_uuid: a, version: v - 1, instance_id: 'ipad-7' },
        { type: 'change', table_name: 'invoices', record_uuid: a, version: v, instance_id: 'ipad-7' },
      ];
      assert.deepEqual(await f1.next(2), expected);
      assert.deepEqual(await f2.next(2), expected);
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
      assert.deepEqual(await f.next(1), [{ type: 'change', table_name: 'customers', record_uuid: rec, version: resolved.body.applied_version, instance_id: 'dev-b' }]);
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
        const closed = feeds.map((f) => new Promise<number>((r) => f.ws.once('close', (code) => r(code))));
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

    test('subscribers are closed with 1001 when the server shuts down', async () => {
      const own = await startSync(backend, {}, { shared });
      const u = await newUser(own);
      const b = await newBusiness(own, u);
      const f = await openFeed(own.url, { businessId: b.id, userId: u.id, token: u.token });
      const closed = new Promise<number>((r) => f.ws.once('close', (code) => r(code)));
      await own.close();
      assert.equal(await closed, 1001);
    });
  });
}
