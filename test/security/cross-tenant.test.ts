import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { businessToken, newBusiness, newUser, startSync, type SyncUnderTest, type TestUser } from '../helpers/sync.js';
import { change, device } from '../sync/push-client.js';
import { fillParams, routeTable, type RouteEntry } from './route-table.js';

/**
 * For every route of the route table that acts for a caller, tenant/user B
 * calls it with its own credentials on tenant/user A's ids. A route that names
 * one of A's resources must answer 403 or 404; any route must answer below
 * 500 and never show A's data (unique markers planted in A's data). A new
 * route is picked up from the table; one that needs a request body, or has a
 * path parameter nobody taught this test, fails until a case is added here.
 */

const marker = (what: string) => `${what}-${randomBytes(6).toString('hex')}`;

function assertNoLeak(r: Reply, markers: string[], what: string): void {
  assert.ok(r.status < 500, `${what}: ${r.status} ${r.text.slice(0, 200)}`);
  for (const m of markers) assert.ok(!r.text.includes(m), `${what} leaked ${m}`);
}

const METRICS_PUBLIC = new Set(['GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /api/v1/openapi.json', 'GET /signin', 'POST /signin', 'POST /signout', 'GET /static/:file']);

for (const backend of BACKENDS) {
  describe(`metrics cross-tenant matrix on ${backend}`, () => {
    let h: MetricsHarness;
    before(async () => { h = await startMetrics(backend); });
    after(() => h.close());

    test('tenant B on tenant A\'s hosts: 404, never A\'s data, on every authenticated route', async () => {
      const a = await h.newTenant(marker('tenant-a'));
      const b = await h.newTenant();
      const hostA = `a-${randomBytes(4).toString('hex')}`;
      const secretHostname = marker('secret-hostname');
      const secretValue = 987_654_321.125;
      const ts = Date.now() - 60_000;
      assert.equal((await ingest(h.url, a.token, makeReport({ agentId: hostA, hostname: secretHostname, ts, network: { secretCounter: secretValue } }))).status, 200);
      assert.equal((await ingest(h.url, b.token, makeReport({ agentId: 'b-1', ts }))).status, 200);
      const markers = [secretHostname, String(secretValue), a.tenantName];

      // Reads first: B's ingest under A's host id (last) creates B's own host of that id.
      const routes = routeTable(h.app).filter((r) => !METRICS_PUBLIC.has(`${r.method} ${r.url}`))
        .sort((x, y) => Number(x.method !== 'GET') - Number(y.method !== 'GET'));
      assert.ok(routes.length >= 5, `routes under test: ${routes.map((r) => `${r.method} ${r.url}`).join(', ')}`);
      for (const route of routes) {
        const key = `${route.method} ${route.url}`;
        const namesA = route.url.includes(':');
        const path = fillParams(route.url, (p) => {
          if (p === 'id') return hostA;
          throw new Error(`${key}: no tenant-A value for :${p}; teach the cross-tenant matrix`);
        });
        let r: Reply;
        if (route.method === 'GET') {
          // Every query parameter a read route may need, aimed at A's data where it names any (A's metric).
          r = await call(h.url, 'GET', `${path}?from=0&points=100&metric=network.secretCounter&metrics=network.secretCounter&limit=100`, { token: b.token });
        } else if (key === 'POST /api/v1/ingest') {
          // B reporting under A's host id creates B's own host of that id; A's host is untouched (checked below).
          r = await ingest(h.url, b.token, makeReport({ agentId: hostA, hostname: 'written-by-b', ts }));
          assert.equal(r.status, 200);
        } else if (key === 'POST /api/v1/ingest/bulk') {
          const body = `${JSON.stringify(makeReport({ agentId: hostA, hostname: 'written-by-b', ts: ts + 1 }))}\n`;
          r = await call(h.url, 'POST', path, { token: b.token, body, headers: { 'content-type': 'application/x-ndjson' } });
          assert.equal(r.status, 200, r.text);
        } else {
          throw new Error(`${key}: no cross-tenant case; add one to the matrix`);
        }
        if (namesA) assert.equal(r.status, 404, `${key}: A's host answers as if it did not exist`);
        else assert.equal(r.status, 200, `${key}: B's own view`);
        assertNoLeak(r, markers, key);
      }
      // Afterwards A still sees exactly its own data.
      const seriesA = await call(h.url, 'GET', `/api/v1/host/${hostA}?from=0&points=100`, { token: a.token });
      assert.deepEqual(seriesA.body.metrics['network.secretCounter'], [secretValue]);
      const page = await call(h.url, 'GET', '/', { token: a.token, headers: { accept: 'text/html' } });
      assert.ok(page.text.includes(secretHostname) && !page.text.includes('written-by-b'), 'A\'s hostname was not overwritten by B');
    });

    test('every authenticated route answers 401 without a token', async () => {
      for (const route of routeTable(h.app).filter((r) => !METRICS_PUBLIC.has(`${r.method} ${r.url}`))) {
        const r = await call(h.url, route.method, fillParams(route.url, () => 'x'), { headers: { accept: 'application/json' }, ...(route.method === 'POST' ? { json: {} } : {}) });
        assert.equal(r.status, 401, `${route.method} ${route.url}`);
      }
    });
  });
}

// The example client page (static files, no data) is public; its data comes through the authenticated API.
const SYNC_PUBLIC = new Set([
  'GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /api/openapi.json', 'POST /api/auth/register', 'POST /api/auth/login', 'POST /api/auth/refresh',
  'GET /example', 'GET /example/', 'GET /example/:name',
]);

interface SyncWorld {
  a: TestUser;
  b: TestUser;
  businessA: string;
  businessB: string;
  conflictA: number;
  attachmentA: string;
  /** An upload of A's with its first bytes in. */
  uploadA: string;
  /** Bytes of it stored. */
  uploadAReceived: number;
  recordA: string;
  markers: string[];
}

async function plantSync(s: SyncUnderTest): Promise<SyncWorld> {
  const a = await newUser(s, { name: marker('user-a') });
  const b = await newUser(s);
  const bizA = await newBusiness(s, a, { name: marker('business-a') });
  const bizB = await newBusiness(s, b);
  const recordA = randomUUID();
  const secret = marker('record-secret');
  assert.equal((await device(s.url, a.token, bizA.id, 'a-1').push({ changes: [change(recordA, 1, { secret })] })).status, 200);
  const conflicting = await device(s.url, a.token, bizA.id, 'a-2').push({ changes: [change(recordA, 1, { secret: `${secret}-conflict` })] });
  const conflictA = conflicting.body.conflicts[0].id as number;
  const form = new FormData();
  form.append('record_type', 'invoice');
  form.append('record_uuid', recordA);
  const fileSecret = marker('file-secret');
  form.append('file', new Blob([fileSecret]), `${marker('filename')}.txt`);
  const up = await call(s.url, 'POST', '/api/sync/attachment', { token: a.token, headers: { 'x-business-id': bizA.id }, body: form });
  assert.equal(up.status, 201, up.text);
  const pieceSecret = marker('piece-secret');
  const session = await call(s.url, 'POST', '/api/sync/uploads', {
    token: a.token, headers: { 'x-business-id': bizA.id },
    json: { record_type: 'invoice', record_uuid: recordA, filename: `${marker('upload-name')}.txt`, size: 1000 },
  });
  assert.equal(session.status, 201, session.text);
  const piece = await call(s.url, 'PATCH', `/api/sync/uploads/${session.body.id}`, {
    token: a.token, headers: { 'content-type': 'application/offset+octet-stream', 'upload-offset': '0' }, body: pieceSecret,
  });
  assert.equal(piece.status, 200, piece.text);
  return {
    a, b, businessA: bizA.id, businessB: bizB.id, conflictA, attachmentA: up.body.uuid, uploadA: session.body.id, uploadAReceived: piece.body.received, recordA,
    markers: [secret, fileSecret, pieceSecret, a.email, bizA.name, bizA.abn, up.body.filename as string, session.body.filename as string],
  };
}

/** What B sends to each route that acts on a business, aimed at A's. Keyed by `METHOD url`. */
function syncRequest(route: RouteEntry, w: SyncWorld): { path: string; json?: unknown; body?: FormData | string; headers: Record<string, string> } {
  const key = `${route.method} ${route.url}`;
  const path = fillParams(route.url, (p) => {
    if (p === 'userId') return w.a.id;
    if (p === 'uuid') return w.attachmentA;
    if (p === 'id' && route.url.startsWith('/api/sync/conflicts')) return String(w.conflictA);
    if (p === 'id' && route.url.startsWith('/api/business')) return w.businessA;
    if (p === 'id' && route.url.startsWith('/api/sync/uploads')) return w.uploadA;
    throw new Error(`${key}: no user-A value for :${p}; teach the cross-tenant matrix`);
  });
  const headers = { 'x-business-id': w.businessA };
  const form = () => {
    const f = new FormData();
    f.append('record_type', 'invoice');
    f.append('record_uuid', w.recordA);
    f.append('file', new Blob(['from b']), 'b.txt');
    return f;
  };
  const bodies: Record<string, () => { json?: unknown; body?: FormData | string; query?: string; headers?: Record<string, string> }> = {
    'POST /api/auth/token': () => ({ json: { business_id: w.businessA } }),
    'POST /api/business': () => ({ json: { name: 'B business two', abn: '51824753556' } }),
    'POST /api/business/:id/members': () => ({ json: { email: w.b.email, role: 'owner' } }),
    'POST /api/sync/push': () => ({ json: { business_id: w.businessA, instance_id: 'b-dev', changes: [change(w.recordA, 2, { by: 'b' })], tombstones: [] } }),
    'POST /api/sync/pull': () => ({ json: { since_version: 0 } }),
    'POST /api/sync/conflicts/:id/resolve': () => ({ json: { resolution: 'local' } }),
    'POST /api/sync/attachment': () => ({ body: form() }),
    'POST /api/sync/uploads': () => ({ json: { record_type: 'invoice', record_uuid: w.recordA, filename: 'b.txt', size: 6 } }),
    // Where A's bytes end, so only the owner check stands between B and A's upload.
    'PATCH /api/sync/uploads/:id': () => ({ body: 'from b', headers: { 'content-type': 'application/offset+octet-stream', 'upload-offset': String(w.uploadAReceived) } }),
    'GET /api/sync/attachments': () => ({ query: `?record_type=invoice&record_uuid=${w.recordA}` }),
    'POST /api/auth/logout': () => ({}),
    'GET /ws/sync': () => ({ query: `?business_id=${w.businessA}&user_id=${w.b.id}` }),
  };
  const make = bodies[key];
  if (!make && route.method !== 'GET' && route.method !== 'DELETE') throw new Error(`${key}: no cross-tenant case; add one to the matrix`);
  const made = make?.() ?? {};
  return { path: path + (made.query ?? ''), headers: { ...headers, ...made.headers }, ...(made.json !== undefined ? { json: made.json } : {}), ...(made.body ? { body: made.body } : {}) };
}

/** Routes that act only for the caller (no business of A in play): they answer for B, without A's data. */
const SELF_ROUTES = new Set(['GET /api/business', 'POST /api/business', 'POST /api/auth/logout']);

for (const backend of BACKENDS) {
  describe(`sync cross-tenant matrix on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('user B, with a user token and with a business token of B\'s business, on A\'s business: 403/404 and never A\'s data on every authenticated route', async () => {
      const w = await plantSync(s);
      // Logout ends B's session (and the business token issued from it): the user token goes last, logout last of all.
      const tokens = { business: await businessToken(s, w.b, w.businessB), user: w.b.token };
      const routes = routeTable(s.app).filter((r) => !SYNC_PUBLIC.has(`${r.method} ${r.url}`))
        .sort((x, y) => Number(x.url === '/api/auth/logout') - Number(y.url === '/api/auth/logout'));
      assert.ok(routes.length >= 15, `routes under test: ${routes.map((r) => `${r.method} ${r.url}`).join(', ')}`);
      for (const [kind, token] of Object.entries(tokens)) {
        // The feed itself, as a real WebSocket upgrade (before logout ends the token).
        const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws/sync?business_id=${w.businessA}&user_id=${w.b.id}`, { headers: { authorization: `Bearer ${token}` } });
        const outcome = await new Promise<string>((resolve) => {
          ws.once('open', () => { resolve('open'); ws.close(); });
          ws.once('unexpected-response', (_req, res) => { resolve(String(res.statusCode)); ws.terminate(); });
          ws.once('error', () => resolve('error'));
        });
        assert.ok(outcome === '403' || outcome === '404', `${kind} token: feed of A's business: ${outcome}`);
        for (const route of routes) {
          const key = `${route.method} ${route.url}`;
          const req = syncRequest(route, w);
          const r = await call(s.url, route.method, req.path, { token, headers: req.headers, ...(req.json !== undefined ? { json: req.json } : {}), ...(req.body ? { body: req.body } : {}) });
          const what = `${kind} token: ${key}`;
          if (SELF_ROUTES.has(key)) {
            assert.ok(r.status < 300 || r.status === 400 || r.status === 403, `${what}: ${r.status} ${r.text}`);
          } else if (key === 'GET /ws/sync') {
            assert.ok(r.status >= 400, `${what}: ${r.status}`);
          } else {
            assert.ok(r.status === 403 || r.status === 404 || (r.status === 400 && kind === 'business'), `${what}: ${r.status} ${r.text}`);
          }
          assertNoLeak(r, w.markers, what);
        }
      }

      // A's business is as A left it: B is no member, the conflict is pending, the data is A's.
      const members = await call(s.url, 'GET', `/api/business/${w.businessA}/members`, { token: w.a.token });
      assert.deepEqual(members.body.map((m: { user_id?: string; id?: string }) => m.user_id ?? m.id), [w.a.id]);
      const status = await call(s.url, 'GET', '/api/sync/status', { token: w.a.token, headers: { 'x-business-id': w.businessA } });
      assert.equal(status.body.pending_conflicts, 1);
      assert.equal(status.body.server_version, 1);
      const list = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${w.recordA}`, { token: w.a.token, headers: { 'x-business-id': w.businessA } });
      assert.equal(list.body.length, 1);
      const upload = await call(s.url, 'GET', `/api/sync/uploads/${w.uploadA}`, { token: w.a.token });
      assert.equal(upload.status, 200, 'B\'s DELETE did not cancel A\'s upload');
      assert.equal(upload.body.received, w.uploadAReceived);
    });

    test('every authenticated route answers 401 without a token and with a forged one, as a plain request and as a WebSocket upgrade', async () => {
      const routes = routeTable(s.app).filter((r) => !SYNC_PUBLIC.has(`${r.method} ${r.url}`));
      assert.ok(routes.length >= 15, `routes under test: ${routes.map((r) => `${r.method} ${r.url}`).join(', ')}`);
      for (const headers of [{}, { authorization: 'Bearer syu_forged' }] as Record<string, string>[]) {
        for (const route of routes) {
          const what = `${route.method} ${route.url} ${JSON.stringify(headers)}`;
          const r = await call(s.url, route.method, fillParams(route.url, () => 'x'), { headers, ...(route.method === 'POST' ? { json: {} } : {}) });
          assert.equal(r.status, 401, `${what}: ${r.text}`);
          assert.equal(r.body.error, 'unauthorized', what);
        }
        const ws = new WebSocket(`${s.url.replace('http', 'ws')}/ws/sync?business_id=${randomUUID()}`, { headers });
        const outcome = await new Promise<string>((resolve) => {
          ws.once('open', () => { resolve('open'); ws.close(); });
          ws.once('unexpected-response', (_req, res) => { resolve(String(res.statusCode)); ws.terminate(); });
          ws.once('error', () => resolve('error'));
        });
        assert.equal(outcome, '401', `feed upgrade ${JSON.stringify(headers)}`);
      }
    });
  });
}
