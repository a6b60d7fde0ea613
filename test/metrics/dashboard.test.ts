import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { hashToken } from '../../src/core/auth/tokens.js';
import type { MetricsDeps } from '../../src/metrics/deps.js';
import { issueToken, revokeToken } from '../../src/metrics/domain/tenant-tokens.js';
import { SESSION_COOKIE } from '../../src/metrics/dashboard/dashboard-routes.js';
import { SESSION_TTL_MS } from '../../src/metrics/dashboard/sessions.js';
import type { DashboardSessionTables } from '../../src/metrics/dashboard/session-store.js';
import { BACKENDS } from '../helpers/backends.js';
import { ingest, ingestBulk, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { ROWS_PER_PIECE } from '../../src/metrics/dashboard/dashboard-page.js';

const HOSTILE = '<img src=x onerror=alert(1)>';
const HTML_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** The session cookie's value from a Set-Cookie header. */
function sessionFrom(res: { headers: Headers }): string {
  const m = new RegExp(`${SESSION_COOKIE}=([^;]*)`).exec(res.headers.get('set-cookie') ?? '');
  assert.ok(m, 'a session cookie is set');
  return m[1]!;
}

for (const backend of BACKENDS) {
  describe(`dashboard on ${backend}`, () => {
    let h: MetricsHarness;
    let deps: MetricsDeps;
    let base: string;
    let origin: string;
    let clock = Date.now();
    const tokens: Record<'a' | 'a2' | 'b', { token: string; tokenId: string }> = {} as never;

    before(async () => {
      // Loopback is the "proxy" so a test can claim HTTPS with X-Forwarded-Proto.
      h = await startMetrics(backend, { trustProxy: ['127.0.0.1'], now: () => clock });
      ({ deps, url: base } = h);
      origin = base;
      tokens.a = await issueToken(deps.store, 'acme');
      tokens.a2 = await issueToken(deps.store, 'acme');
      tokens.b = await issueToken(deps.store, 'globex');
      const ts = clock - 20_000;
      for (const [tok, body] of [
        [tokens.a.token, makeReport({ agentId: 'web-1', hostname: 'web-1.acme', ts, cpu: { usage: 42.25 }, memory: { total: 8e9, used: 5e9, free: 3e9, percent: 61.04 } })],
        [tokens.a.token, makeReport({ agentId: 'evil', hostname: HOSTILE, ts, platform: `Tom & Jerry's "OS"` })],
        [tokens.b.token, makeReport({ agentId: 'b-secret-host', hostname: 'globex-db', ts })],
      ] as const) {
        const r = await ingest(base, tok, body);
        assert.equal(r.status, 200, r.text);
      }
    });

    after(() => h.close());

    async function signIn(token: string, headers: Record<string, string> = {}) {
      return fetch(`${base}/signin`, {
        method: 'POST', redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin, ...headers },
        body: new URLSearchParams({ token }).toString(),
      });
    }

    const page = (headers: Record<string, string>) => fetch(`${base}/`, { redirect: 'manual', headers });

    test('a bearer token shows its tenant hosts with CPU, memory and last report, agent text escaped', async () => {
      const r = await page({ authorization: `Bearer ${tokens.a.token}` });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
      assert.equal(r.headers.get('cache-control'), 'no-store');
      assert.equal(r.headers.get('content-security-policy'), "default-src 'self'");
      const body = await r.text();
      assert.match(body, /web-1\.acme/);
      assert.match(body, /42\.3 %/);
      assert.match(body, /61\.0 %/);
      assert.match(body, /20 s ago/);
      assert.match(body, /Tenant <strong>acme<\/strong>/);
      assert.match(body, /&lt;img src=x onerror=alert\(1\)&gt;/);
      assert.match(body, /Tom &amp; Jerry&#39;s &quot;OS&quot;/);
      assert.ok(!body.includes('<img'));
      assert.doesNotMatch(body, /globex|b-secret-host/, 'tenant B is invisible to tenant A');
      assert.doesNotMatch(body, /signout/, 'no session, nothing to sign out of');
    });

    test('page parameters a schema would refuse (repeated, too long) fall back to the page\'s default, on every page', async () => {
      const auth = { authorization: `Bearer ${tokens.a.token}`, accept: 'text/html' };
      const odd = ['range=1h&range=6h', `range=${'x'.repeat(17)}`, 'dir=ascending', `sort=${'s'.repeat(17)}`, `q=${'q'.repeat(257)}`, `from=${'1'.repeat(33)}&to=2`, 'from=1969-12-31T00:00&to=1970-01-02T00:00'];
      for (const path of ['/', '/hosts/web-1', '/fleet']) {
        for (const q of odd) {
          const r = await fetch(`${base}${path}?${q}`, { redirect: 'manual', headers: auth });
          assert.equal(r.status, 200, `${path}?${q.slice(0, 40)}: ${r.status}`);
          assert.match(r.headers.get('content-type') ?? '', /text\/html/);
          const body = await r.text();
          assert.doesNotMatch(body, /data-from="-/, `${path}?${q.slice(0, 40)}: no negative range reaches the charts`);
        }
      }
      assert.match(await (await fetch(`${base}/`, { headers: auth })).text(), /maxlength="256"/, 'the filter box stops at the bound');
    });

    test('a host list longer than a piece is streamed whole: every host once, the document closed', async () => {
      const { token } = await h.newTenant('big-fleet');
      const ts = clock - 20_000;
      const many = Array.from({ length: ROWS_PER_PIECE + 40 }, (_, i) => makeReport({ agentId: `n-${String(i).padStart(4, '0')}`, ts }));
      const stored = await ingestBulk(base, token, many);
      assert.equal(stored.body.stored, many.length, stored.text);
      const r = await page({ authorization: `Bearer ${token}` });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('transfer-encoding'), 'chunked', 'sent as it is rendered');
      assert.equal(r.headers.get('content-security-policy'), "default-src 'self'");
      const body = await r.text();
      const ids = [...body.matchAll(/<tr class="host [a-z]+" data-host-id="([^"]+)"/g)].map((m) => m[1]);
      assert.deepEqual(ids, many.map((m) => m.agentId));
      assert.match(body, /<\/html>\n$/);
    });

    test('a browser without credentials is redirected to sign in; other clients get 401 JSON', async () => {
      let r = await page({ accept: HTML_ACCEPT });
      assert.equal(r.status, 303);
      assert.equal(r.headers.get('location'), '/signin');
      for (const accept of ['*/*', 'application/json']) {
        r = await page({ accept });
        assert.equal(r.status, 401);
        assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="metrics"');
        assert.equal((await r.json() as { error: string }).error, 'unauthorized');
      }
    });

    test('a wrong or malformed bearer token is a 401 JSON even for a browser', async () => {
      for (const authorization of ['Bearer mtk_not-a-real-token-at-all', 'Basic abc', `Bearer ${tokens.a.token}x`]) {
        const r = await page({ authorization, accept: HTML_ACCEPT });
        assert.equal(r.status, 401, authorization);
        assert.deepEqual(Object.keys(await r.json() as object).sort(), ['details', 'error']);
      }
    });

    test('GET /signin serves the form', async () => {
      const r = await fetch(`${base}/signin`);
      assert.equal(r.status, 200);
      assert.match(await r.text(), /<form method="post" action="\/signin">/);
    });

    test('signing in with a wrong token re-shows the form with an error and 401, and sets no cookie', async () => {
      const r = await signIn('mtk_wrong');
      assert.equal(r.status, 401);
      assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
      assert.equal(r.headers.get('set-cookie'), null);
      const body = await r.text();
      assert.match(body, /That token is not valid/);
      assert.doesNotMatch(body, /mtk_wrong/, 'the submitted token is not echoed');
    });

    test('signing in sets an HttpOnly SameSite=Strict cookie, redirects to /, and the session shows only its tenant', async () => {
      const r = await signIn(`  ${tokens.a.token}\n`);
      assert.equal(r.status, 303);
      assert.equal(r.headers.get('location'), '/');
      const setCookie = r.headers.get('set-cookie')!;
      assert.match(setCookie, /HttpOnly/);
      assert.match(setCookie, /SameSite=Strict/);
      assert.match(setCookie, /Path=\//);
      assert.doesNotMatch(setCookie, /Secure/, 'plain HTTP: a Secure cookie would never come back');
      const expires = Date.parse(/Expires=([^;]+)/.exec(setCookie)![1]!);
      assert.ok(Math.abs(expires - (clock + SESSION_TTL_MS)) < 2000, 'expires with the session');
      const sid = sessionFrom(r);

      const dash = await page({ cookie: `${SESSION_COOKIE}=${sid}`, accept: HTML_ACCEPT });
      assert.equal(dash.status, 200);
      const body = await dash.text();
      assert.match(body, /web-1\.acme/);
      assert.match(body, /<form class="signout" method="post" action="\/signout">/);
      assert.doesNotMatch(body, /globex/);

      const b = await signIn(tokens.b.token);
      const bBody = await (await page({ cookie: `${SESSION_COOKIE}=${sessionFrom(b)}` })).text();
      assert.match(bBody, /globex-db/);
      assert.doesNotMatch(bBody, /web-1\.acme|onerror/);
    });

    test('only a hash of the session id is stored', async () => {
      const sid = sessionFrom(await signIn(tokens.a.token));
      const db = deps.database.db.withTables<DashboardSessionTables>();
      const rows = await db.selectFrom('dashboard_sessions').select(['id_hash', 'token_hash']).execute();
      assert.ok(rows.some((row) => row.id_hash === hashToken(sid) && row.token_hash === hashToken(tokens.a.token)));
      assert.ok(!rows.some((row) => row.id_hash === sid));
    });

    test('the cookie is Secure when the request came over HTTPS through a trusted proxy', async () => {
      const r = await signIn(tokens.a.token, { 'x-forwarded-proto': 'https', origin: base.replace('http:', 'https:') });
      assert.equal(r.status, 303);
      assert.match(r.headers.get('set-cookie')!, /Secure/);
    });

    test('a bearer header takes precedence over a session cookie', async () => {
      const sid = sessionFrom(await signIn(tokens.a.token));
      const body = await (await page({ cookie: `${SESSION_COOKIE}=${sid}`, authorization: `Bearer ${tokens.b.token}` })).text();
      assert.match(body, /globex-db/);
      assert.doesNotMatch(body, /web-1\.acme/);
    });

    test('sign-in and sign-out posted from another origin are refused with 403', async () => {
      for (const headers of [{ origin: 'http://evil.example' }, { origin: 'null' }, { origin: '', 'sec-fetch-site': 'cross-site' }]) {
        const init = { ...headers } as Record<string, string>;
        if (init['origin'] === '') delete init['origin'];
        const r = await fetch(`${base}/signin`, {
          method: 'POST', redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...init },
          body: new URLSearchParams({ token: tokens.a.token }).toString(),
        });
        assert.equal(r.status, 403, JSON.stringify(headers));
        assert.equal(r.headers.get('set-cookie'), null);
      }
      const sid = sessionFrom(await signIn(tokens.a.token));
      const out = await fetch(`${base}/signout`, { method: 'POST', redirect: 'manual', headers: { cookie: `${SESSION_COOKIE}=${sid}`, origin: 'http://evil.example' } });
      assert.equal(out.status, 403);
      assert.equal((await page({ cookie: `${SESSION_COOKIE}=${sid}` })).status, 200, 'the session survives a forged sign-out');
    });

    test('signing out ends the session server-side and clears the cookie', async () => {
      const sid = sessionFrom(await signIn(tokens.a.token));
      const out = await fetch(`${base}/signout`, { method: 'POST', redirect: 'manual', headers: { cookie: `${SESSION_COOKIE}=${sid}`, origin } });
      assert.equal(out.status, 303);
      assert.equal(out.headers.get('location'), '/signin');
      assert.match(out.headers.get('set-cookie')!, new RegExp(`${SESSION_COOKIE}=;.*Expires=Thu, 01 Jan 1970`));
      const again = await page({ cookie: `${SESSION_COOKIE}=${sid}`, accept: HTML_ACCEPT });
      assert.equal(again.status, 303, 'a replayed cookie no longer works');
      assert.equal((await page({ cookie: `${SESSION_COOKIE}=${sid}` })).status, 401);
      const twice = await fetch(`${base}/signout`, { method: 'POST', redirect: 'manual', headers: { origin } });
      assert.equal(twice.status, 303, 'signing out without a session is harmless');
    });

    test('revoking the token ends the sessions it opened, at once', async () => {
      const sid = sessionFrom(await signIn(tokens.a2.token));
      assert.equal((await page({ cookie: `${SESSION_COOKIE}=${sid}` })).status, 200);
      await revokeToken(deps.store, tokens.a2.tokenId);
      const r = await page({ cookie: `${SESSION_COOKIE}=${sid}`, accept: HTML_ACCEPT });
      assert.equal(r.status, 303);
      assert.match(r.headers.get('set-cookie')!, /Expires=Thu, 01 Jan 1970/, 'the dead cookie is cleared');
      assert.equal((await signIn(tokens.a2.token)).status, 401, 'a revoked token cannot sign in');
    });

    test('a session expires after the documented lifetime; garbage cookies are ignored', async () => {
      const sid = sessionFrom(await signIn(tokens.a.token));
      clock += SESSION_TTL_MS - 1000;
      assert.equal((await page({ cookie: `${SESSION_COOKIE}=${sid}` })).status, 200);
      clock += 1000;
      assert.equal((await page({ cookie: `${SESSION_COOKIE}=${sid}`, accept: HTML_ACCEPT })).status, 303);
      for (const bad of ['x', 'A'.repeat(43), "'; DROP TABLE dashboard_sessions; --"]) {
        assert.equal((await page({ cookie: `${SESSION_COOKIE}=${encodeURIComponent(bad)}`, accept: HTML_ACCEPT })).status, 303);
      }
    });

    test('sign-in rejects a body without a token (400), an oversize form (413) and a non-form body (415) with JSON errors', async () => {
      let r = await fetch(`${base}/signin`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin }, body: 'nottoken=1' });
      assert.equal(r.status, 400);
      assert.match((await r.json() as { details: string }).details, /token/);
      r = await fetch(`${base}/signin`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin }, body: `token=${'x'.repeat(5000)}` });
      assert.equal(r.status, 413);
      assert.equal((await r.json() as { error: string }).error, 'payload_too_large');
      r = await fetch(`${base}/signin`, { method: 'POST', headers: { 'content-type': 'text/plain', origin }, body: 'token=x' });
      assert.equal(r.status, 415);
      assert.equal((await r.json() as { error: string }).error, 'unsupported_media_type');
    });

    test('the form parser stays on the dashboard routes; the session cookie reads the API (GET) but never writes', async () => {
      const form = await fetch(`${base}/api/v1/ingest`, {
        method: 'POST', headers: { authorization: `Bearer ${tokens.a.token}`, 'content-type': 'application/x-www-form-urlencoded' }, body: 'agentId=x',
      });
      assert.equal(form.status, 415);
      const sid = sessionFrom(await signIn(tokens.a.token));
      const cookie = `${SESSION_COOKIE}=${sid}`;
      const hosts = await fetch(`${base}/api/v1/hosts`, { headers: { cookie } });
      assert.equal(hosts.status, 200, 'a signed-in page reads the API with its cookie');
      assert.deepEqual(await hosts.json(), ['evil', 'web-1'], 'its own tenant only');
      // What the dashboard's scripts read stays out of the browser's disk cache, as the pages do.
      for (const path of ['/api/v1/hosts', '/api/v1/hosts/status', '/api/v1/host/web-1', '/api/v1/aggregate', '/api/v1/alerts', '/api/v1/top/lists?metrics=cpu.usage', '/api/v1/sparklines?metric=cpu.usage']) {
        const r = await fetch(`${base}${path}`, { headers: { cookie } });
        await r.body?.cancel();
        assert.equal(r.status, 200, path);
        assert.equal(r.headers.get('cache-control'), 'no-store', path);
      }
      const write = await fetch(`${base}/api/v1/ingest`, {
        method: 'POST', headers: { cookie, 'content-type': 'application/json', origin }, body: JSON.stringify(makeReport({ agentId: 'via-cookie', ts: clock })),
      });
      assert.equal(write.status, 401, 'writes stay bearer-only');
      assert.equal(write.headers.get('www-authenticate'), 'Bearer realm="metrics"');
      const garbage = await fetch(`${base}/api/v1/hosts`, { headers: { cookie: `${SESSION_COOKIE}=${'x'.repeat(43)}` } });
      assert.equal(garbage.status, 401, 'an unknown session is no credential');
      const badBearer = await fetch(`${base}/api/v1/hosts`, { headers: { cookie, authorization: 'Bearer mtk_wrong' } });
      assert.equal(badBearer.status, 401, 'a bearer header, when present, decides alone');
    });

    test('static assets are served from the allow-list with validators; anything else is 404', async () => {
      const css = await fetch(`${base}/static/dashboard.css`);
      assert.equal(css.status, 200);
      assert.equal(css.headers.get('content-type'), 'text/css; charset=utf-8');
      const etag = css.headers.get('etag')!;
      assert.match(await css.text(), /\.hosts/);
      const notModified = await fetch(`${base}/static/dashboard.css`, { headers: { 'if-none-match': etag } });
      assert.equal(notModified.status, 304);
      assert.equal(await notModified.text(), '');
      assert.equal((await fetch(`${base}/static/favicon.svg`)).headers.get('content-type'), 'image/svg+xml');
      const missing = await fetch(`${base}/static/nope.css`);
      assert.equal(missing.status, 404);
      assert.equal((await missing.json() as { error: string }).error, 'not_found');
    });

    test('directory traversal through the static route reaches nothing', async () => {
      for (const rawPath of ['/static/../package.json', '/static/..%2f..%2fpackage.json', '/static/%2e%2e/%2e%2e/package.json', '/static/..%5c..%5cpackage.json', '/static/%2fetc%2fpasswd']) {
        const { status, body } = await rawGet(base, rawPath);
        assert.equal(status, 404, rawPath);
        assert.doesNotMatch(body, /fleetsync|root:/, rawPath);
      }
    });
  });
}

test('the OpenAPI document lists every status of the dashboard routes', async (t) => {
  const h = await startMetrics('sqlite');
  t.after(() => h.close());
  const doc = await (await fetch(`${h.url}/api/v1/openapi.json`)).json() as { paths: Record<string, Record<string, { responses: object }>> };
  const codes = (p: string, method: string) => Object.keys(doc.paths[p]![method]!.responses).sort();
  assert.deepEqual(codes('/', 'get'), ['200', '303', '401', '500']);
  assert.deepEqual(codes('/hosts/{id}', 'get'), ['200', '303', '401', '404', '500', '503']);
  assert.deepEqual(codes('/fleet', 'get'), ['200', '303', '401', '500', '503']);
  assert.deepEqual(codes('/signin', 'get'), ['200']);
  assert.deepEqual(codes('/signin', 'post'), ['303', '400', '401', '403', '413', '415', '500']);
  assert.deepEqual(codes('/signout', 'post'), ['303', '403', '500']);
  assert.deepEqual(codes('/static/{file}', 'get'), ['200', '304', '404']);
});

test('while ingest is paused for want of disk space, every page says so at the top; ingest gets the 503; otherwise no notice', async (t) => {
  // A floor above any disk: the guard finds the data directory under it at start.
  const full = await startMetrics('sqlite', { minFreeDiskBytes: Number.MAX_SAFE_INTEGER });
  t.after(() => full.close());
  const { token } = await full.newTenant('acme');
  const refused = await ingest(full.url, token, makeReport({ agentId: 'web-1' }));
  assert.equal(refused.status, 503);
  assert.equal(refused.body.details, "the server's storage is full; nothing was stored, retry later");
  const page = async (url: string, path: string) => {
    const r = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(r.status, 200, path);
    return r.text();
  };
  const notice = '<p class="notice ingest-paused" role="status">Reports are not being accepted: the server&#39;s disk is nearly full. Agents keep theirs and send them once space is freed.</p>';
  for (const path of ['/', '/fleet']) assert.ok((await page(full.url, path)).includes(notice), `${path} says ingest is paused`);
  // The host whose report was refused is not there: its page says why it may be missing, under the tenant's name.
  const missing = await fetch(`${full.url}/hosts/web-1`, { headers: { authorization: `Bearer ${token}`, accept: 'text/html' } });
  assert.equal(missing.status, 404);
  const missingPage = await missing.text();
  assert.ok(missingPage.includes(notice), 'the host page of a host never stored says ingest is paused');
  assert.match(missingPage, /acme/);
  const normal = await startMetrics('sqlite');
  t.after(() => normal.close());
  const other = await normal.newTenant('acme');
  assert.equal((await ingest(normal.url, other.token, makeReport({ agentId: 'web-1' }))).status, 200);
  for (const path of ['/', '/fleet', '/hosts/web-1']) {
    const r = await fetch(`${normal.url}${path}`, { headers: { authorization: `Bearer ${other.token}` } });
    assert.doesNotMatch(await r.text(), /ingest-paused/, path);
  }
});

/** GET with the path sent byte-for-byte (fetch would normalise the dot segments away). */
function rawGet(base: string, rawPath: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path: rawPath, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString('utf8'); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
