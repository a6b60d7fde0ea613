import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

/** The specification's five headers, spelled out here rather than imported, so a change to the core is caught. */
const REQUIRED = {
  'strict-transport-security': 'max-age=31536000',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'x-xss-protection': '1; mode=block',
  'content-security-policy': "default-src 'self'",
};

function assertHeaders(r: Reply, what: string): void {
  for (const [h, v] of Object.entries(REQUIRED)) assert.equal(r.headers.get(h), v, `${what}: ${h}`);
}

for (const backend of BACKENDS) {
  describe(`sync security headers on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { userRateLimit: 30, ipRateLimit: 10 }); });
    after(() => s.close());

    /** A handshake written by hand (no client library normalises it): the answer's status line, headers and body. */
    function handshake(path: string, token: string, lines: string): Promise<{ status: string; headers: Map<string, string>; body: string }> {
      const { port } = new URL(s.url);
      return new Promise((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nConnection: Upgrade\r\n${lines}\r\n`);
        });
        let text = '';
        const done = () => {
          const end = text.indexOf('\r\n\r\n');
          const [status = '', ...head] = text.slice(0, end < 0 ? text.length : end).split('\r\n');
          resolve({ status, headers: new Map(head.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()])), body: end < 0 ? '' : text.slice(end + 4) });
        };
        socket.on('data', (chunk) => {
          text += chunk.toString('latin1');
          // A 101 stays open: its header section is the whole answer.
          if (/^HTTP\/1\.1 101 /.test(text) && text.includes('\r\n\r\n')) { socket.destroy(); done(); }
        });
        socket.on('end', done);
        socket.on('error', reject);
      });
    }

    test('the change feed\'s 101 Switching Protocols carries the five headers too (run first: the next test spends the per-IP limit)', async () => {
      const owner = await newUser(s);
      const biz = await newBusiness(s, owner);
      const r = await handshake(`/ws/sync?business_id=${biz.id}&user_id=${owner.id}`, owner.token,
        'Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n');
      assert.match(r.status, /^HTTP\/1\.1 101 /);
      for (const [h, v] of Object.entries(REQUIRED)) assert.equal(r.headers.get(h), v, `101: ${h}`);
    });

    test('a handshake the WebSocket layer refuses (no key, another Upgrade) is a JSON 400 with the five headers, not a bare text/html one', async () => {
      const owner = await newUser(s);
      const biz = await newBusiness(s, owner);
      const path = `/ws/sync?business_id=${biz.id}&user_id=${owner.id}`;
      for (const lines of ['Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n', 'Upgrade: h2c\r\n']) {
        const r = await handshake(path, owner.token, lines);
        assert.match(r.status, /^HTTP\/1\.1 400 /, lines);
        assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.equal(JSON.parse(r.body).error, 'invalid_request');
        for (const [h, v] of Object.entries(REQUIRED)) assert.equal(r.headers.get(h), v, `${lines}: ${h}`);
      }
    });

    test('every kind of answer carries the five security headers: 200, 201, 204, 400, 401, 403, 404, 409, 413, 415, 429', async () => {
      const owner = await newUser(s);
      const other = await newUser(s);
      const biz = await newBusiness(s, owner);
      const seen = new Map<number, Reply>();
      const record = (r: Reply) => { seen.set(r.status, r); return r; };
      record(await call(s.url, 'GET', '/api/business', { token: owner.token }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name: 'N', abn: '51824753556' } }));
      record(await call(s.url, 'POST', `/api/business/${biz.id}/members`, { token: owner.token, json: { email: other.email } }));
      record(await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${other.id}`, { token: owner.token }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name: 'N', abn: '1' } }));
      record(await call(s.url, 'GET', '/api/business'));
      record(await call(s.url, 'GET', `/api/business/${biz.id}`, { token: other.token }));
      record(await call(s.url, 'GET', '/no/such/route'));
      record(await call(s.url, 'DELETE', `/api/business/${biz.id}/members/${owner.id}`, { token: owner.token }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, json: { name: 'x'.repeat(2_000_000), abn: '1' } }));
      record(await call(s.url, 'POST', '/api/business', { token: owner.token, body: 'name=x', headers: { 'content-type': 'text/plain' } }));
      record(await call(s.url, 'GET', '/api/openapi.json'));
      for (let i = 0; i < 12; i++) record(await call(s.url, 'POST', '/api/auth/login', { json: { email: owner.email, password: 'wrong password' } }));
      assert.deepEqual([...seen.keys()].sort((a, b) => a - b), [200, 201, 204, 400, 401, 403, 404, 409, 413, 415, 429]);
      for (const [status, r] of seen) assertHeaders(r, String(status));
    });
  });
}
