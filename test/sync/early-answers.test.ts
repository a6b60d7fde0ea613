import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BACKENDS } from '../helpers/backends.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { DRAIN_LIMITS } from '../../src/sync/http/bounded-drain.js';

const MAX = 64 * 1024;
/**
 * A limit the bytes sent with the headers already pass: busboy parses what the request buffered in one go and reaches
 * the limit before the handler has the file part. With MAX that happens only where the handler starts late (a
 * PostgreSQL round trip first) and Node buffers much (64 KiB from Node 22); with TINY it happens on every backend.
 */
const TINY = 4 * 1024;

/** A raw HTTP/1.1 connection: what it has received so far, and whether the server closed it. */
function connect(url: string) {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  const state = { received: '', closed: false, written: 0 };
  socket.on('data', (c: Buffer) => { state.received += c.toString('latin1'); });
  socket.on('close', () => { state.closed = true; });
  socket.on('error', () => undefined);
  /** Waits (up to 10 s: a liveness check, not a speed one) until `done` holds. */
  const until = async (done: () => boolean) => {
    for (let i = 0; i < 1000 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
    return done();
  };
  const responses = () => [...state.received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  /** Resolves once the socket can take more (or has closed); its listeners are removed either way. */
  const writable = () => new Promise<void>((resolve) => {
    const done = () => { socket.off('drain', done); socket.off('close', done); resolve(); };
    socket.once('drain', done);
    socket.once('close', done);
  });
  return { socket, state, until, responses, writable };
}

function multipartHead(boundary: string): string {
  return [`--${boundary}`, 'Content-Disposition: form-data; name="record_type"', '', 'invoice',
    `--${boundary}`, 'Content-Disposition: form-data; name="record_uuid"', '', randomUUID(),
    `--${boundary}`, 'Content-Disposition: form-data; name="file"; filename="big.bin"', 'Content-Type: application/octet-stream', '', ''].join('\r\n');
}

for (const backend of BACKENDS) {
  describe(`sync early answers on ${backend}`, () => {
    let s: SyncUnderTest;
    let tiny: SyncUnderTest;
    let dir: string;
    before(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'fs-early-'));
      s = await startSync(backend, { attachmentMaxBytes: MAX, attachmentDir: dir });
      tiny = await startSync(backend, { attachmentMaxBytes: TINY, attachmentDir: dir });
    });
    after(async () => {
      await s.close();
      await tiny.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('after an attachment 413 the keep-alive connection serves the next request', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const boundary = 'b0undary';
      const body = Buffer.concat([Buffer.from(multipartHead(boundary)), randomBytes(MAX + 768 * 1024), Buffer.from(`\r\n--${boundary}--\r\n`)]);
      const c = connect(s.url);
      c.socket.write(`POST /api/sync/attachment HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${u.token}\r\nX-Business-ID: ${b.id}\r\n`
        + `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${body.length}\r\n\r\n`);
      c.socket.write(body);
      assert.ok(await c.until(() => c.responses().length === 1), 'the 413 arrives');
      assert.deepEqual(c.responses(), [413]);
      c.socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n');
      assert.ok(await c.until(() => c.responses().length === 2 || c.state.closed), 'the connection answers or closes, it does not hang');
      assert.deepEqual(c.responses(), [413, 200], c.state.received.slice(0, 400));
      c.socket.destroy();
    });

    const upload = (token: string, businessId: string, length: number) =>
      `POST /api/sync/attachment HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${token}\r\nX-Business-ID: ${businessId}\r\nContent-Type: multipart/form-data; boundary=b0undary\r\nContent-Length: ${length}\r\n\r\n${multipartHead('b0undary')}`;
    for (const [what, request, server, status] of [
      ['a JSON body over the limit', (token: string, businessId: string, length: number) =>
        `POST /api/sync/push HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${token}\r\nX-Business-ID: ${businessId}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`, () => s, 413],
      ['an upload over the limit', upload, () => s, 413],
      ['an upload over the limit before the handler has its file part', upload, () => tiny, 413],
      ['a body sent without a token', (_token: string, _businessId: string, length: number) =>
        `POST /api/sync/push HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`, () => s, 401],
    ] as const) {
      test(`${what}, answered early: the client reads the answer, and the server reads only a bounded rest before closing`, async () => {
        const srv = server();
        const u = await newUser(srv);
        const b = await newBusiness(srv, u);
        const declared = 64 * 1024 * 1024;
        const c = connect(srv.url);
        c.socket.write(request(u.token, b.id, declared));
        // Keep sending, as a client streaming a large body does, until the server closes or everything is sent.
        const chunk = randomBytes(256 * 1024);
        let sent = 0;
        while (sent < declared && !c.state.closed && !c.socket.destroyed) {
          const ok = c.socket.write(chunk);
          sent += chunk.length;
          if (!ok) await c.writable();
        }
        assert.ok(await c.until(() => c.state.closed), 'the server closes the connection');
        assert.deepEqual(c.responses(), [status], `the answer was read: ${c.state.received.slice(0, 200)}`);
        // Far less than the declared body was accepted: the drain is bounded (plus what socket buffers hold).
        assert.ok(sent < declared, `all ${declared} bytes were read`);
        assert.ok(DRAIN_LIMITS.bytes < declared);
      });
    }
  });
}
