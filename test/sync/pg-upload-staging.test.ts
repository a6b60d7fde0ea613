import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser, startSync } from '../helpers/sync.js';
import { change, device } from './push-client.js';

const skip = BACKENDS.includes('postgres') ? false : 'needs PostgreSQL (the PostgreSQL blob store)';

/** Fails with `what` unless `p` settles first; the bound only turns a hang into a failure, it measures nothing. */
async function within<T>(p: Promise<T>, what: string, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not answer while uploads were in progress`)), ms); });
  try { return await Promise.race([p, hang]); } finally { clearTimeout(timer); }
}

test('ten slow uploads in progress do not stall push, pull and sign-in on that instance (PostgreSQL blob store)', { skip }, async (t) => {
  // The pool holds 10 connections: before uploads were staged, ten open uploads held all of them.
  const s = await startSync('postgres');
  t.after(() => s.close());
  const u = await newUser(s);
  const b = await newBusiness(s, u);
  const { port } = new URL(s.url);
  const boundary = `----b${randomBytes(8).toString('hex')}`;
  const head = (length: number) => [
    'POST /api/sync/attachment HTTP/1.1', `Host: 127.0.0.1:${port}`, `Authorization: Bearer ${u.token}`, `X-Business-ID: ${b.id}`,
    `Content-Type: multipart/form-data; boundary=${boundary}`, `Content-Length: ${length}`, '', '',
  ].join('\r\n');
  const start = `--${boundary}\r\nContent-Disposition: form-data; name="record_type"\r\n\r\ninvoice\r\n`
    + `--${boundary}\r\nContent-Disposition: form-data; name="record_uuid"\r\n\r\n${randomUUID()}\r\n`
    + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const firstHalf = randomBytes(300 * 1024);
  const secondHalf = randomBytes(300 * 1024);
  const end = `\r\n--${boundary}--\r\n`;
  const length = Buffer.byteLength(start) + firstHalf.length + secondHalf.length + Buffer.byteLength(end);

  const sockets = await Promise.all(Array.from({ length: 10 }, async () => {
    const socket = net.connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    const replies: Buffer[] = [];
    socket.on('data', (d: Buffer) => replies.push(d));
    socket.write(head(length) + start);
    socket.write(firstHalf);
    return { socket, reply: () => Buffer.concat(replies).toString('latin1') };
  }));
  t.after(() => { for (const { socket } of sockets) socket.destroy(); });
  // Let every upload get past authentication and into the blob store.
  await sleep(500);

  const dev = device(s.url, u.token, b.id);
  const pushed = await within(dev.push({ changes: [change(randomUUID(), 1)] }), 'push');
  assert.equal(pushed.status, 200, pushed.text);
  const pulled = await within(dev.pull(0), 'pull');
  assert.equal(pulled.status, 200);
  const login = await within(call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } }), 'login');
  assert.equal(login.status, 200, login.text);

  for (const { socket } of sockets) socket.write(Buffer.concat([secondHalf, Buffer.from(end)]));
  await Promise.all(sockets.map(async ({ socket, reply }) => {
    while (!/\r\n\r\n[\s\S]*\}/.test(reply())) await once(socket, 'data');
  }));
  for (const { reply } of sockets) assert.match(reply(), /^HTTP\/1\.1 201 /);
});
