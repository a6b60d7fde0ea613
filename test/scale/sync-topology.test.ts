import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import WebSocket from 'ws';
import { call } from '../helpers/http.js';
import { validAbn } from '../helpers/sync.js';
import { change, device } from '../sync/push-client.js';
import { device as clientDevice, until } from '../client/client-fixtures.js';
import { METRICS_TOKEN, TOPOLOGY_SKIP, callFrom, promSample, rawRequest, scrape, startInstance, startTopology, type Topology } from '../helpers/topology.js';

/**
 * Two sync-service processes on one PostgreSQL schema and one Redis prefix,
 * behind HAProxy (deploy/haproxy.cfg), at the spec's default limits (100
 * requests/min per user, 20/min per IP, lockout after 5 failed logins).
 * Each client below comes from its own loopback address, as distinct
 * machines would, so one test's unauthenticated requests never spend
 * another's per-IP budget.
 */
describe('sync service: two instances behind HAProxy', { skip: TOPOLOGY_SKIP }, () => {
  let topo: Topology;
  const secrets: string[] = [METRICS_TOKEN];
  let ipCounter = 10;
  const nextIp = () => `127.0.${Math.floor(ipCounter / 250) + 1}.${(ipCounter++ % 250) + 1}`;

  interface User { id: string; email: string; password: string; token: string }

  async function newUser(): Promise<User> {
    const email = `u-${randomBytes(5).toString('hex')}@example.com`;
    const password = `pw-${randomBytes(9).toString('base64url')}`;
    const r = await callFrom(nextIp(), topo.proxyUrl, 'POST', '/api/auth/register', { json: { email, name: 'Scale', password } });
    assert.equal(r.status, 201, r.text);
    secrets.push(password, r.body.token, r.body.refresh_token);
    return { id: r.body.user.id, email, password, token: r.body.token };
  }

  async function newBusiness(owner: User, members: User[] = []): Promise<string> {
    const r = await call(topo.proxyUrl, 'POST', '/api/business', { token: owner.token, json: { name: 'Scale Co', abn: validAbn() } });
    assert.equal(r.status, 201, r.text);
    for (const m of members) {
      const a = await call(topo.proxyUrl, 'POST', `/api/business/${r.body.id}/members`, { token: owner.token, json: { email: m.email, role: 'member' } });
      assert.equal(a.status, 201, a.text);
    }
    return r.body.id as string;
  }

  /** Opens the feed at `baseUrl` and collects its messages. */
  async function openFeed(baseUrl: string, user: User, businessId: string) {
    const ws = new WebSocket(`${baseUrl.replace('http', 'ws')}/ws/sync?business_id=${businessId}&user_id=${user.id}`, { headers: { authorization: `Bearer ${user.token}` } });
    const messages: Array<Record<string, unknown>> = [];
    const waiters: Array<() => void> = [];
    let ready: () => void = () => undefined;
    const subscribed = new Promise<void>((resolve) => { ready = resolve; });
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as Record<string, unknown>;
      if (message['type'] === 'ready') return ready();
      if (message['type'] === 'heartbeat') return;
      messages.push(message);
      for (const w of waiters.splice(0)) w();
    });
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
    // The server's `ready`: the subscription is in place (across instances, in Redis), so a push from here reaches it.
    await subscribed;
    return {
      ws, messages, closed,
      async until(pred: (m: Record<string, unknown>) => boolean) {
        while (!messages.some(pred)) await new Promise<void>((resolve) => waiters.push(resolve));
      },
    };
  }

  before(async () => { topo = await startTopology({ service: 'sync', args: ['--scrypt-log2n', '10'] }); });
  after(async () => { await topo?.stop(); });

  test('a push handled by one instance reaches feed subscribers connected to the other', async () => {
    const [a, b] = topo.instances;
    const owner = await newUser();
    const businessId = await newBusiness(owner);
    const onB = await openFeed(b!.url, owner, businessId);
    const viaProxy = await Promise.all([openFeed(topo.proxyUrl, owner, businessId), openFeed(topo.proxyUrl, owner, businessId)]);
    const rec = randomUUID();
    const pushed = await device(a!.url, owner.token, businessId).push({ changes: [change(rec, 1, { name: 'Ada' })] });
    assert.equal(pushed.status, 200, pushed.text);
    assert.equal(pushed.body.accepted, 1);
    for (const feed of [onB, ...viaProxy]) {
      await feed.until((m) => m['record_uuid'] === rec);
      // The change crossed instances whole (Redis), data included, as the other instance applied it.
      assert.deepEqual(Object.keys(feed.messages[0]!).sort(), ['created_at', 'data', 'instance_id', 'operation', 'record_uuid', 'record_version', 'table_name', 'type', 'version']);
      assert.deepEqual(feed.messages[0]!['data'], { name: 'Ada' });
      feed.ws.close();
    }
  });

  test('the per-user limit holds across instances: the 101st request in a minute gets 429 wherever it lands', async () => {
    const u = await newUser();
    const replies = [];
    for (let i = 0; i < 100; i++) replies.push((await call(topo.proxyUrl, 'GET', '/api/business', { token: u.token })).status);
    assert.deepEqual(replies, Array(100).fill(200));
    for (const target of [topo.proxyUrl, ...topo.instances.map((i) => i.url)]) {
      const r = await call(target, 'GET', '/api/business', { token: u.token });
      assert.equal(r.status, 429, target);
      assert.equal(r.body.error, 'rate_limited');
      assert.ok(Number(r.body.retry_after) >= 1 && Number(r.headers.get('retry-after')) >= 1);
    }
    const served = await Promise.all(topo.instances.map(async (i) => promSample(await scrape(i.url), 'http_requests_total', { route: '/api/business', method: 'GET', status: '200' }) ?? 0));
    assert.ok(served.every((n) => n > 0), `both instances served the user's requests: ${served}`);
  });

  test('the per-IP limit counts the client address HAProxy forwards, not the proxy\'s', async () => {
    const client = nextIp();
    const statuses = [];
    for (let i = 0; i < 21; i++) {
      // A forged X-Forwarded-For changes nothing: HAProxy drops it and sends the real address.
      statuses.push((await callFrom(client, topo.proxyUrl, 'GET', '/api/business', { headers: { 'x-forwarded-for': `10.9.${i}.1` } })).status);
    }
    assert.deepEqual(statuses, [...Array(20).fill(401), 429]);
    // Another client behind the same proxy has its own budget.
    assert.equal((await callFrom(nextIp(), topo.proxyUrl, 'GET', '/api/business')).status, 401);
  });

  test('a forged X-Forwarded-For from a peer that is not a trusted proxy is ignored', async () => {
    const peer = nextIp();
    const target = topo.instances[0]!.url;
    const statuses = [];
    for (let i = 0; i < 21; i++) {
      statuses.push((await callFrom(peer, target, 'GET', '/api/business', { headers: { 'x-forwarded-for': `10.8.${i}.1` } })).status);
    }
    assert.deepEqual(statuses, [...Array(20).fill(401), 429], 'every request counted against the real peer address');
  });

  test('a lockout made through one instance holds on the other, even for the right password', async () => {
    const u = await newUser();
    const [a, b] = topo.instances;
    const ip = nextIp();
    for (let i = 0; i < 5; i++) {
      const r = await callFrom(ip, a!.url, 'POST', '/api/auth/login', { json: { email: u.email, password: 'wrong-password-1' } });
      assert.equal(r.status, 401, r.text);
    }
    const r = await callFrom(nextIp(), b!.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } });
    assert.equal(r.status, 429, r.text);
    assert.equal(r.body.token, undefined);
  });

  test('a refresh token rotated on one instance is refused on the other, and its re-use revokes the rotated family on every instance', async () => {
    const [a, b] = topo.instances;
    const email = `u-${randomBytes(5).toString('hex')}@example.com`;
    const password = `pw-${randomBytes(9).toString('base64url')}`;
    const reg = await callFrom(nextIp(), a!.url, 'POST', '/api/auth/register', { json: { email, name: 'Rotate', password } });
    assert.equal(reg.status, 201, reg.text);
    secrets.push(password, reg.body.token, reg.body.refresh_token);
    const rotated = await callFrom(nextIp(), a!.url, 'POST', '/api/auth/refresh', { json: { refresh_token: reg.body.refresh_token } });
    assert.equal(rotated.status, 200, rotated.text);
    secrets.push(rotated.body.token, rotated.body.refresh_token);
    assert.equal((await call(b!.url, 'GET', '/api/business', { token: rotated.body.token })).status, 200);
    const replayed = await callFrom(nextIp(), b!.url, 'POST', '/api/auth/refresh', { json: { refresh_token: reg.body.refresh_token } });
    assert.equal(replayed.status, 401);
    const again = await callFrom(nextIp(), a!.url, 'POST', '/api/auth/refresh', { json: { refresh_token: rotated.body.refresh_token } });
    assert.equal(again.status, 401, 'the whole family was revoked by the re-use');
  });

  test('an attachment uploaded through one instance downloads byte-exact through the other', async () => {
    const owner = await newUser();
    const businessId = await newBusiness(owner);
    const [a, b] = topo.instances;
    const bytes = randomBytes(700_000);
    const form = new FormData();
    form.append('record_type', 'invoice');
    form.append('record_uuid', randomUUID());
    form.append('file', new Blob([bytes]), 'scan.pdf');
    const up = await callFrom('127.0.0.1', a!.url, 'POST', '/api/sync/attachment', { token: owner.token, body: form, headers: { 'x-business-id': businessId } });
    assert.equal(up.status, 201, up.text);
    const down = await callFrom('127.0.0.1', b!.url, 'GET', `/api/sync/attachment/${up.body.uuid}`, { token: owner.token, headers: { 'x-business-id': businessId } }) as Awaited<ReturnType<typeof callFrom>> & { raw: Buffer };
    assert.equal(down.status, 200);
    assert.ok(down.raw.equals(bytes));
    const other = await newUser();
    const denied = await call(b!.url, 'GET', `/api/sync/attachment/${up.body.uuid}`, { token: other.token, headers: { 'x-business-id': await newBusiness(other) } });
    assert.equal(denied.status, 404);
  });

  test('a resumable upload whose pieces reach different instances (and the proxy) becomes one byte-exact attachment', async () => {
    const owner = await newUser();
    const businessId = await newBusiness(owner);
    const [a, b] = topo.instances;
    const bytes = randomBytes(700_000);
    const headers = { 'x-business-id': businessId };
    const started = await call(a!.url, 'POST', '/api/sync/uploads', { token: owner.token, headers, json: { record_type: 'invoice', record_uuid: randomUUID(), filename: 'scan.pdf', size: bytes.length } });
    assert.equal(started.status, 201, started.text);
    const id = started.body.id as string;
    const send = (url: string, from: number, to: number) => call(url, 'PATCH', `/api/sync/uploads/${id}`, {
      token: owner.token, body: bytes.subarray(from, to), headers: { 'content-type': 'application/offset+octet-stream', 'upload-offset': String(from) },
    });
    assert.equal((await send(a!.url, 0, 300_000)).body.received, 300_000);
    assert.equal((await send(b!.url, 300_000, 500_000)).body.received, 500_000);
    assert.equal((await call(a!.url, 'GET', `/api/sync/uploads/${id}`, { token: owner.token })).body.received, 500_000);
    const stale = await send(a!.url, 300_000, 500_000);
    assert.equal(stale.status, 409, 'an instance that did not take the last piece knows of it');
    const done = await send(topo.proxyUrl, 500_000, bytes.length);
    assert.equal(done.status, 200, done.text);
    const down = await callFrom('127.0.0.1', b!.url, 'GET', `/api/sync/attachment/${done.body.attachment.uuid}`, { token: owner.token, headers }) as Awaited<ReturnType<typeof callFrom>> & { raw: Buffer };
    assert.equal(down.status, 200);
    assert.ok(down.raw.equals(bytes));
  });

  test('through the proxy, a pull page comes gzipped to a client that accepts it, the same JSON; attachment bytes and their ranges do not', async () => {
    const owner = await newUser();
    const businessId = await newBusiness(owner);
    const headers = { authorization: `Bearer ${owner.token}`, 'x-business-id': businessId, 'content-type': 'application/json' };
    const changes = Array.from({ length: 300 }, (_, i) => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { name: `Customer ${i}`, email: `c${i}@example.com` } }));
    const pushed = await rawRequest(topo.proxyUrl, 'POST', '/api/sync/push', { ...headers, 'accept-encoding': 'gzip' }, JSON.stringify({ business_id: businessId, instance_id: 'device-1', changes }));
    assert.equal(pushed.status, 200, pushed.body.toString());
    assert.equal(pushed.headers['content-encoding'], undefined, 'a push\'s small answer is sent as it is');
    const login = await rawRequest(topo.proxyUrl, 'POST', '/api/auth/login', { 'content-type': 'application/json', 'accept-encoding': 'gzip' }, JSON.stringify({ email: owner.email, password: owner.password }), nextIp());
    assert.equal(login.status, 200, login.body.toString());
    assert.equal(login.headers['content-encoding'], undefined, 'an answer with tokens is never compressed');
    secrets.push((JSON.parse(login.body.toString()) as { token: string }).token, (JSON.parse(login.body.toString()) as { refresh_token: string }).refresh_token);
    const pullBody = JSON.stringify({ business_id: businessId, since_version: 0 });
    const plain = await rawRequest(topo.proxyUrl, 'POST', '/api/sync/pull', headers, pullBody);
    assert.equal(plain.headers['content-encoding'], undefined, 'a client that does not say it accepts gzip gets none');
    const zipped = await rawRequest(topo.proxyUrl, 'POST', '/api/sync/pull', { ...headers, 'accept-encoding': 'gzip, deflate' }, pullBody);
    assert.equal(zipped.status, 200);
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.deepEqual(JSON.parse(gunzipSync(zipped.body).toString()), JSON.parse(plain.body.toString()));
    assert.equal((JSON.parse(plain.body.toString()) as { changes: unknown[] }).changes.length, 300);
    assert.ok(zipped.body.length * 4 < plain.body.length, `${zipped.body.length} of ${plain.body.length} bytes`);

    const bytes = Buffer.alloc(200_000, 'attachment text compresses well ');
    const form = new FormData();
    form.append('record_type', 'invoice');
    form.append('record_uuid', randomUUID());
    form.append('file', new Blob([bytes]), 'notes.txt');
    const up = await call(topo.proxyUrl, 'POST', '/api/sync/attachment', { token: owner.token, body: form, headers: { 'x-business-id': businessId } });
    assert.equal(up.status, 201, up.text);
    const down = await rawRequest(topo.proxyUrl, 'GET', `/api/sync/attachment/${up.body.uuid}`, { authorization: `Bearer ${owner.token}`, 'accept-encoding': 'gzip', range: 'bytes=1000-', 'if-range': `"${up.body.sha256}"` });
    assert.equal(down.status, 206);
    assert.equal(down.headers['content-encoding'], undefined);
    assert.equal(down.headers['content-range'], `bytes 1000-199999/200000`);
    assert.ok(down.body.equals(bytes.subarray(1000)));
  });

  test('the client library through the proxy: two devices edit, each hears the other over the feed (requests and sockets round robin over both instances), and a fresh device\'s pulls come gzipped', async () => {
    const owner = await newUser();
    const businessId = await newBusiness(owner);
    const encodings: string[] = [];
    const watching: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith('/api/sync/pull')) encodings.push(res.headers.get('content-encoding') ?? 'identity');
      return res;
    };
    const [a, b] = await Promise.all([clientDevice(topo.proxyUrl, owner, businessId), clientDevice(topo.proxyUrl, owner, businessId)]);
    try {
      a.start();
      b.start();
      await until(() => a.syncState === 'up-to-date' && b.syncState === 'up-to-date', 15_000, 'both devices to connect');
      const ids = Array.from({ length: 300 }, () => randomUUID());
      for (const [i, id] of ids.entries()) await a.put('customers', id, { name: `Customer ${i}`, email: `c${i}@example.com` });
      const last = randomUUID();
      await b.put('notes', last, { text: 'from b' });
      await until(async () => (await b.list('customers')).length === 300 && (await a.get('notes', last)) !== null, 20_000, 'each device to have the other\'s edits');
      const fresh = await clientDevice(topo.proxyUrl, owner, businessId, { fetch: watching });
      try {
        await fresh.sync();
        assert.equal((await fresh.list('customers')).length, 300);
        assert.deepEqual(await fresh.get('notes', last), { text: 'from b' });
        assert.ok(encodings.includes('gzip'), `pull answers: ${encodings.join(', ')}`);
      } finally {
        await fresh.close();
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('8 devices pushing concurrently through both instances get unique, gap-free versions; a puller sees each change once, in order', async () => {
    const owner = await newUser();
    const members = await Promise.all(Array.from({ length: 8 }, () => newUser()));
    const reader = await newUser();
    const businessId = await newBusiness(owner, [...members, reader]);
    const devices = members.map((m) => device(topo.proxyUrl, m.token, businessId));
    const puller = device(topo.proxyUrl, reader.token, businessId);
    const PUSHES = 8;
    const PER_PUSH = 5;
    let pushing = true;
    const seen: number[] = [];
    const pulling = (async () => {
      let since = 0;
      // Bounded polling keeps the reader under its own 100/min limit.
      for (let polls = 0; pushing && polls < 80; polls++) {
        const page = await puller.pull(since);
        assert.equal(page.status, 200, page.text);
        for (const c of page.body.changes as Array<{ version: number }>) seen.push(c.version);
        since = page.body.version;
        await new Promise((r) => setTimeout(r, 20));
      }
      const rest = await puller.pullAll(since);
      seen.push(...rest.changes.map((c) => c.version));
    })();
    await Promise.all(devices.map(async (d) => {
      for (let p = 0; p < PUSHES; p++) {
        const r = await d.push({ changes: Array.from({ length: PER_PUSH }, () => change(randomUUID(), 1)) });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.accepted, PER_PUSH);
      }
    }));
    pushing = false;
    await pulling;
    const total = 8 * PUSHES * PER_PUSH;
    assert.deepEqual(seen, Array.from({ length: total }, (_, i) => i + 1), 'every version once, in order, none skipped');
    const all = await puller.pullAll(0);
    assert.deepEqual(all.changes.map((c) => c.version), Array.from({ length: total }, (_, i) => i + 1));
  });

  test('/healthz, /readyz and the token-protected /metrics answer through the proxy', async () => {
    assert.deepEqual((await call(topo.proxyUrl, 'GET', '/healthz')).body, { status: 'ok' });
    assert.deepEqual((await call(topo.proxyUrl, 'GET', '/readyz')).body, { status: 'ready' });
    const denied = await call(topo.proxyUrl, 'GET', '/metrics', { token: 'not-the-metrics-token' });
    assert.equal(denied.status, 401);
    const bodies = await Promise.all(topo.instances.map((i) => scrape(i.url)));
    const sum = (name: string, labels: Record<string, string> = {}) => bodies.reduce((n, b) => n + (promSample(b, name, labels) ?? 0), 0);
    assert.ok(sum('sync_pushes_total') >= 65, 'pushes counted');
    assert.ok(sum('sync_pushed_items_total', { outcome: 'accepted' }) >= 321);
    assert.ok(sum('sync_pulled_changes_total') >= 640);
    assert.ok(sum('rate_limit_rejections_total', { route: '/api/business' }) >= 3);
    assert.ok(sum('rate_limit_rejections_total', { route: '/api/auth/login' }) >= 1);
    assert.equal(sum('sync_feed_connections'), 0, 'closed feeds are no longer counted');
  });

  test('logs: JSON, a request id on every request line, the user and business where known, never a secret', async () => {
    const lines = topo.instances.flatMap((i) => i.logs).filter((l) => l.startsWith('{'));
    let withBusiness = 0;
    for (const line of lines) {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if ('req' in entry || 'res' in entry) assert.ok(typeof entry['reqId'] === 'string', line);
      if (entry['business'] && entry['user'] && entry['msg'] === 'request completed') withBusiness++;
      for (const s of secrets) assert.ok(!line.includes(s), `a secret reached the log: ${line}`);
    }
    assert.ok(withBusiness > 0, 'completed requests name their user and business');
  });

  test('SIGTERM with a feed client that never answers the close: the instance still exits 0, the other feeds get 1001', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'scale-sync-frozen-'));
    const instance = await startInstance('sync', 'sync-frozen', [...topo.sharedArgs, '--port', '0', '--data-dir', dir]);
    let frozen: net.Socket | undefined;
    try {
      const owner = await newUser();
      const businessId = await newBusiness(owner);
      const feed = await openFeed(instance.url, owner, businessId);
      // Completes the upgrade, then never reads nor answers anything: a frozen app, or a peer gone without a FIN.
      const u = new URL(instance.url);
      frozen = net.connect(Number(u.port), u.hostname);
      await new Promise((resolve) => frozen!.once('connect', resolve));
      frozen.write(`GET /ws/sync?business_id=${businessId}&user_id=${owner.id} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n`
        + `Connection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n`
        + `Authorization: Bearer ${owner.token}\r\n\r\n`);
      const status = await new Promise<string>((resolve) => frozen!.once('data', (d: Buffer) => resolve(d.toString('latin1').split('\r\n')[0]!)));
      assert.equal(status, 'HTTP/1.1 101 Switching Protocols');
      frozen.pause();
      while (promSample(await scrape(instance.url), 'sync_feed_connections') !== 2) await new Promise((r) => setTimeout(r, 20));
      assert.equal(await instance.kill('SIGTERM'), 0, instance.logs.filter((l) => /shut|timed out/.test(l)).join('\n'));
      assert.equal(await feed.closed, 1001);
    } finally {
      frozen?.destroy();
      await instance.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('SIGTERM during load: feeds get 1001, the instance exits cleanly, and no acknowledged write is lost', async () => {
    const [a, b] = topo.instances;
    const writers = await Promise.all(Array.from({ length: 4 }, () => newUser()));
    const owner = writers[0]!;
    const businessId = await newBusiness(owner, writers.slice(1));
    const feed = await openFeed(a!.url, owner, businessId);
    const acknowledged: string[] = [];
    let stopped = false;
    let ackedAtSignal = -1;
    const failures: string[] = [];
    // Each writer stops after 60 pushes, or once the survivor has acknowledged 40 more after the signal.
    const enough = () => stopped && acknowledged.length >= ackedAtSignal + 40;
    const load = Promise.all(writers.map(async (w) => {
      const d = device(topo.proxyUrl, w.token, businessId);
      for (let i = 0; i < 60 && !enough(); i++) {
        const rec = randomUUID();
        const r = await d.push({ changes: [change(rec, 1)] }).catch((e: unknown) => String(e));
        if (typeof r !== 'string' && r.status === 200 && r.body.accepted === 1) acknowledged.push(rec);
        else failures.push(typeof r === 'string' ? r : `${r.status} ${r.text}`);
      }
    }));
    while (acknowledged.length < 20) await new Promise((r) => setTimeout(r, 10));
    ackedAtSignal = acknowledged.length;
    stopped = true;
    const exitCode = await a!.kill('SIGTERM');
    assert.equal(exitCode, 0, 'graceful exit within the shutdown bound');
    assert.equal(await feed.closed, 1001);
    await load;
    assert.ok(acknowledged.length > ackedAtSignal, 'the survivor kept acknowledging writes');
    const stored = await device(b!.url, owner.token, businessId).pullAll(0);
    const have = new Set(stored.changes.map((c) => c.record_uuid));
    const lost = acknowledged.filter((rec) => !have.has(rec));
    assert.deepEqual(lost, [], 'every acknowledged push is stored');
    // HAProxy retries what the closing instance refused (connection refused, or 503 before any processing): clients see no error.
    assert.deepEqual(failures, []);
  });
});
