import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest, type TestBusiness, type TestUser } from '../helpers/sync.js';

/** A client error: a 4xx, the JSON error body, nothing that looks like a stack trace or internals. */
function assertCleanClientError(r: Reply, what: string): void {
  assert.ok(r.status >= 400 && r.status < 500, `${what}: status ${r.status} ${r.text.slice(0, 200)}`);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/, what);
  assert.equal(typeof r.body.error, 'string', what);
  assert.ok(r.body.details === undefined || typeof r.body.details === 'string', what);
  assert.doesNotMatch(r.text, /\bat [\w.<>]+ \(|node_modules|\.ts:\d+|SQLITE_|syntax error|relation "|password_hash/, what);
}

const HOSTILE_JSON: unknown[] = [
  null, 0, 'string', [], [{}], true,
  { email: null, name: null, password: null },
  { email: ['a@b.com'], name: {}, password: 1 },
  { email: 'a\u0000b@example.com', name: 'nul\u0000name', password: 'pass\u0000word-long' },
  { email: 'x@example.com', name: '\ud800\udfff\ud800', password: '\ud800'.repeat(20) },
  { email: 'x@example.com', name: 'N', password: 'p'.repeat(100_000) },
  { email: `${'a'.repeat(10_000)}@example.com`, name: 'N', password: 'long enough password' },
  { constructor: { prototype: { admin: true } }, email: 'x@example.com' },
  { email: "' OR '1'='1", name: 'Robert\'); DROP TABLE users;--', password: "' OR '1'='1' --" },
  { email: 'x@example.com', name: '<script>alert(1)</script>', password: 'long enough password', extra: 'x' },
  { business_id: '../../etc/passwd' },
  { business_id: 12345 },
  { refresh_token: { $ne: null } },
  { refresh_token: 'syr_' + 'A'.repeat(5_000) },
  { name: 'n\u0000', abn: '51824753556' },
  { name: 'N', abn: '5182475355\u0000' },
  { name: 'N', abn: '٥١٨٢٤٧٥٣٥٥٦' },
  { email: 'x@example.com', role: 'owner"; DROP TABLE memberships; --' },
];

const RAW_BODIES: Array<[string, string]> = [
  ['{', 'application/json'],
  ['{"email": "a@b.com",}', 'application/json'],
  ['{"__proto__": {"admin": true}, "email": "a@b.com", "password": "long enough password"}', 'application/json'],
  ['[' .repeat(50_000) + ']'.repeat(50_000), 'application/json'],
  ['\xff\xfe\x00garbage', 'application/json'],
  ['', 'application/json'],
  ['email=a@b.com&password=x', 'application/x-www-form-urlencoded'],
  ['<xml/>', 'application/xml'],
  ['plain', 'text/plain'],
  ['--b\r\nContent-Disposition: form-data; name="x"\r\n\r\ny\r\n--b--', 'multipart/form-data; boundary=b'],
];

for (const backend of BACKENDS) {
  describe(`sync errors on ${backend}`, () => {
    let s: SyncUnderTest;
    let owner: TestUser;
    let biz: TestBusiness;
    before(async () => {
      s = await startSync(backend);
      owner = await newUser(s);
      biz = await newBusiness(s, owner);
    });
    after(() => s.close());

    const endpoints = () => [
      ['POST', '/api/auth/register', undefined],
      ['POST', '/api/auth/login', undefined],
      ['POST', '/api/auth/refresh', undefined],
      ['POST', '/api/auth/token', owner.token],
      ['POST', '/api/business', owner.token],
      ['POST', `/api/business/${biz.id}/members`, owner.token],
    ] as const;

    test('hostile JSON bodies get clean 4xx errors on every endpoint, never a 500 or a stack trace', async () => {
      for (const [method, path, token] of endpoints()) {
        for (const json of HOSTILE_JSON) {
          const r = await call(s.url, method, path, { ...(token ? { token } : {}), json });
          if (r.status < 300) continue;
          assertCleanClientError(r, `${path} ${JSON.stringify(json).slice(0, 80)}`);
        }
      }
    });

    test('malformed, oversized, deeply nested and non-JSON bodies get clean 4xx errors', async () => {
      for (const [method, path, token] of endpoints()) {
        for (const [body, type] of RAW_BODIES) {
          const r = await call(s.url, method, path, { ...(token ? { token } : {}), body, headers: { 'content-type': type } });
          assertCleanClientError(r, `${path} ${type} ${body.slice(0, 40)}`);
        }
      }
    });

    test('hostile headers and paths get clean 4xx errors', async () => {
      const attempts: Array<[string, string, Record<string, string>]> = [
        ['GET', '/api/business', { authorization: 'Bearer ' + 'A'.repeat(4000) }],
        ['GET', '/api/business', { authorization: 'Bearer syu_\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9' }],
        ['GET', '/api/business', { authorization: 'Bearer a b c d e f g h' }],
        ['GET', `/api/business/${biz.id}%00`, { authorization: `Bearer ${owner.token}` }],
        ['GET', '/api/business/%E0%A4%A', { authorization: `Bearer ${owner.token}` }],
        ['GET', `/api/business/${'9'.repeat(5000)}`, { authorization: `Bearer ${owner.token}` }],
        ['GET', '/api/business/..%2F..%2Fetc%2Fpasswd', { authorization: `Bearer ${owner.token}` }],
        ['DELETE', `/api/business/${biz.id}/members/%00`, { authorization: `Bearer ${owner.token}` }],
        ['PUT', '/api/business', { authorization: `Bearer ${owner.token}` }],
        ['GET', '/api/auth/login', {}],
      ];
      for (const [method, path, headers] of attempts) {
        const r = await call(s.url, method, path, { headers });
        assertCleanClientError(r, `${method} ${path}`);
      }
    });

    test('after the hostile requests nothing stored changed: one business, one member, the owner signs in', async () => {
      const list = await call(s.url, 'GET', '/api/business', { token: owner.token });
      assert.deepEqual(list.body.map((b: { id: string }) => b.id), [biz.id]);
      const members = await call(s.url, 'GET', `/api/business/${biz.id}/members`, { token: owner.token });
      assert.equal(members.body.length, 1);
      assert.equal((await call(s.url, 'POST', '/api/auth/login', { json: { email: owner.email, password: owner.password } })).status, 200);
      const users = await s.deps.database.db.selectFrom('users').select('email').execute();
      assert.ok(users.every((u) => !u.email.includes('\u0000') && !u.email.includes("'")), 'no hostile account was created');
    });

    test('error bodies are the specification\'s shape: {error, details}', async () => {
      const r = await call(s.url, 'POST', '/api/auth/register', { json: { email: 'bad', name: 'N', password: 'long enough password' } });
      assert.deepEqual(Object.keys(r.body).sort(), ['details', 'error']);
      const nf = await call(s.url, 'GET', '/api/nothing-here');
      assert.equal(nf.status, 404);
      assert.equal(nf.body.error, 'not_found');
    });

    test('the OpenAPI document lists every endpoint with its documented statuses', async () => {
      const r = await call(s.url, 'GET', '/api/openapi.json');
      assert.equal(r.status, 200);
      const paths = r.body.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>;
      const expect: Array<[string, string, string[]]> = [
        ['/api/auth/register', 'post', ['201', '400', '409', '429']],
        ['/api/auth/login', 'post', ['200', '400', '401', '429']],
        ['/api/auth/refresh', 'post', ['200', '400', '401', '429']],
        ['/api/auth/token', 'post', ['200', '400', '401', '403', '404', '429']],
        ['/api/auth/logout', 'post', ['204', '401', '403', '429']],
        ['/api/business', 'get', ['200', '401', '403', '429']],
        ['/api/business', 'post', ['201', '400', '401', '403', '429']],
        ['/api/business/{id}', 'get', ['200', '400', '401', '403', '404', '429']],
        ['/api/business/{id}/members', 'get', ['200', '400', '401', '403', '404', '429']],
        ['/api/business/{id}/members', 'post', ['201', '400', '401', '403', '404', '409', '429']],
        ['/api/business/{id}/members/{userId}', 'delete', ['204', '400', '401', '403', '404', '409', '429']],
      ];
      for (const [path, method, statuses] of expect) {
        const op = paths[path]?.[method];
        assert.ok(op, `${method} ${path} documented`);
        for (const st of statuses) assert.ok(op.responses[st], `${method} ${path} documents ${st}`);
      }
    });
  });
}
