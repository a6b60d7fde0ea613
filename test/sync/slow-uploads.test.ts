import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { listen } from '../helpers/http.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { loadSyncConfig } from '../../src/sync/config.js';
import { createSyncDeps, type SyncDeps } from '../../src/sync/deps.js';
import { buildSyncApp } from '../../src/sync/app.js';
import type { App } from '../../src/core/http/create-app.js';
import WebSocket from 'ws';

// Deadlines shortened from 30 s so the tests can watch them: 1 s of total body time, 1 s of upload silence.
const DEADLINE_MS = 1000;

/** Sends `head`, then `body` in `pieces` pieces `gapMs` apart; resolves with what the server answered and whether it closed. */
async function trickle(url: string, head: string, body: Buffer, pieces: number, gapMs: number, stallMs = 0) {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  let received = '';
  let closed = false;
  socket.on('data', (c: Buffer) => { received += c.toString('latin1'); });
  socket.on('close', () => { closed = true; });
  socket.on('error', () => undefined);
  socket.write(head);
  const size = Math.ceil(body.length / pieces);
  for (let i = 0; i < pieces && !closed; i++) {
    if (i === Math.floor(pieces / 2) && stallMs) await sleep(stallMs);
    socket.write(body.subarray(i * size, (i + 1) * size));
    await sleep(gapMs);
  }
  for (let i = 0; i < 500 && !/\r\n\r\n[\s\S]*\}$/.test(received) && !closed; i++) await sleep(10);
  socket.destroy();
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
  return { status, received, closed };
}

function uploadRequest(token: string, businessId: string, fileBytes: Buffer): { head: string; body: Buffer } {
  const b = 'b0undary';
  const body = Buffer.concat([
    Buffer.from([`--${b}`, 'Content-Disposition: form-data; name="record_type"', '', 'invoice', `--${b}`, 'Content-Disposition: form-data; name="record_uuid"', '', randomUUID(),
      `--${b}`, 'Content-Disposition: form-data; name="file"; filename="slow.bin"', 'Content-Type: application/octet-stream', '', ''].join('\r\n')),
    fileBytes, Buffer.from(`\r\n--${b}--\r\n`),
  ]);
  return { head: `POST /api/sync/attachment HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${token}\r\nX-Business-ID: ${businessId}\r\nContent-Type: multipart/form-data; boundary=${b}\r\nContent-Length: ${body.length}\r\n\r\n`, body };
}

// The backends side by side (each its own service): their tests mostly wait out deadlines, a few seconds each.
describe('sync body deadlines', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    // One test at a time on a service: each looks at what its upload left in the shared attachment directory.
    describe(`on ${backend}`, { concurrency: 1 }, () => {
      let storage: TestStorage;
      let dir: string;
      let deps: SyncDeps;
      let app: App;
      let url: string;
      before(async () => {
        storage = await freshStorage(backend);
        dir = mkdtempSync(path.join(os.tmpdir(), 'fs-slow-'));
        const config = { ...loadSyncConfig(), scryptLog2N: 10, logLevel: 'silent' as const, dataDir: storage.dataDir, databaseUrl: storage.databaseUrl, dbSchema: storage.pgSchema, attachmentDir: dir };
        deps = await createSyncDeps(config);
        app = await buildSyncApp(deps, { deadlines: { bodyMs: DEADLINE_MS, uploadIdleMs: DEADLINE_MS } });
        url = await listen(app);
      });
      after(async () => {
        await app.close();
        await deps.close();
        await storage.cleanup();
        rmSync(dir, { recursive: true, force: true });
      });

      test('an upload that keeps arriving slowly succeeds, however long it takes in total', async () => {
        const u = await newUser({ url });
        const b = await newBusiness({ url }, u);
        const { head, body } = uploadRequest(u.token, b.id, randomBytes(64 * 1024));
        // About 3 s in total, three times the deadline, never silent for more than a fifth of it.
        const r = await trickle(url, head, body, 15, DEADLINE_MS / 5);
        assert.equal(r.status, 201, r.received.slice(0, 300));
      });

      test('an upload that stops sending gets a JSON 408 and the connection is closed; nothing is kept', async () => {
        const u = await newUser({ url });
        const b = await newBusiness({ url }, u);
        const { head, body } = uploadRequest(u.token, b.id, randomBytes(64 * 1024));
        const stored = () => readdirSync(dir).filter((f) => f !== '.incoming').length;
        const before = stored();
        const r = await trickle(url, head, body, 4, 50, DEADLINE_MS * 3);
        assert.equal(r.status, 408, r.received.slice(0, 300));
        assert.match(r.received, /"error":"request_timeout"/);
        assert.match(r.received, /x-content-type-options: nosniff/i);
        assert.ok(r.closed, 'the connection is closed');
        for (let i = 0; i < 100 && readdirSync(path.join(dir, '.incoming')).length; i++) await sleep(20);
        assert.deepEqual(readdirSync(path.join(dir, '.incoming')), [], 'the partial upload is removed');
        assert.equal(stored(), before);
      });

      test('a resumable upload\'s PATCH that stops sending gets 408 and keeps the bytes that arrived; one that keeps arriving slowly is not cut', async () => {
        const u = await newUser({ url });
        const b = await newBusiness({ url }, u);
        const bytes = randomBytes(64 * 1024);
        const start = await fetch(`${url}/api/sync/uploads`, {
          method: 'POST', headers: { authorization: `Bearer ${u.token}`, 'x-business-id': b.id, 'content-type': 'application/json' },
          body: JSON.stringify({ record_type: 'invoice', record_uuid: randomUUID(), filename: 'slow.bin', size: bytes.length }),
        });
        const { id } = await start.json() as { id: string };
        const head = (offset: number, length: number) => `PATCH /api/sync/uploads/${id} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${u.token}\r\n`
          + `Content-Type: application/offset+octet-stream\r\nUpload-Offset: ${offset}\r\nContent-Length: ${length}\r\n\r\n`;
        // Two pieces of 16 KiB, then silence (trickle stalls half way through its 4 pieces): 408, and those bytes are kept.
        const r = await trickle(url, head(0, bytes.length), bytes, 4, 50, DEADLINE_MS * 3);
        assert.equal(r.status, 408, r.received.slice(0, 300));
        assert.ok(r.closed, 'the connection is closed');
        const received = async () => ((await (await fetch(`${url}/api/sync/uploads/${id}`, { headers: { authorization: `Bearer ${u.token}` } })).json()) as { received: number }).received;
        for (let i = 0; i < 100 && await received() === 0; i++) await sleep(20);
        assert.equal(await received(), bytes.length / 2, 'every byte that arrived, and none other');
        // The rest, slowly (about 2 s, twice the deadline): not cut, and it completes the upload.
        const rest = await trickle(url, head(bytes.length / 2, bytes.length / 2), bytes.subarray(bytes.length / 2), 10, DEADLINE_MS / 5);
        assert.equal(rest.status, 200, rest.received.slice(0, 300));
        assert.match(rest.received, /"attachment":\{"uuid"/);
      });

      test('a JSON body still arriving after the total deadline gets 408, even when it never pauses long', async () => {
        const u = await newUser({ url });
        const b = await newBusiness({ url }, u);
        const json = Buffer.from(JSON.stringify({ business_id: b.id, instance_id: 'slow', changes: [] }).padEnd(2000, ' '));
        const head = `POST /api/sync/push HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${u.token}\r\nX-Business-ID: ${b.id}\r\nContent-Type: application/json\r\nContent-Length: ${json.length}\r\n\r\n`;
        const r = await trickle(url, head, json, 20, DEADLINE_MS / 8);
        assert.equal(r.status, 408, r.received.slice(0, 300));
        assert.match(r.received, /did not arrive within/);
      });

      test('a change-feed WebSocket is not a slow body: it stays open past the deadlines', async () => {
        const u = await newUser({ url });
        const b = await newBusiness({ url }, u);
        const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/sync?business_id=${b.id}&user_id=${u.id}`, { headers: { authorization: `Bearer ${u.token}` } });
        let closed = false;
        ws.on('close', () => { closed = true; });
        await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
        await sleep(DEADLINE_MS * 2.5);
        assert.equal(closed, false);
        assert.equal(ws.readyState, WebSocket.OPEN);
        ws.close();
      });
    });
  }
});
