import { after, before, describe, test } from 'node:test';
import type { Readable } from 'node:stream';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest, type TestUser } from '../helpers/sync.js';

const MAX = 64 * 1024;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Waits for a condition the server reaches on its own (no timing is asserted); gives up after 10 s. */
async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await sleep(10);
  assert.ok(condition(), 'condition not reached');
}

interface Part { name: string; filename?: string; content: Buffer | string; rawDisposition?: string }

/** A hand-built multipart body, so file names reach the server byte for byte (no client-side escaping). */
function multipart(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----b${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = p.rawDisposition ?? `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    const type = p.filename !== undefined || p.rawDisposition ? '\r\nContent-Type: application/octet-stream' : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`, 'utf8'), Buffer.from(p.content), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

for (const backend of BACKENDS) {
  describe(`sync attachments on ${backend}`, () => {
    let s: SyncUnderTest;
    let dir: string;
    before(async () => {
      // The local-disk blob store on both backends, so the files themselves can be inspected
      // (the PostgreSQL blob store has its own tests in test/conformance).
      dir = mkdtempSync(path.join(os.tmpdir(), 'fs-attach-'));
      s = await startSync(backend, { attachmentMaxBytes: MAX, attachmentDir: dir });
    });
    after(async () => {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    });

    function upload(token: string, businessId: string | undefined, parts: Part[]) {
      const { body, contentType } = multipart(parts);
      return call(s.url, 'POST', '/api/sync/attachment', { token, body, headers: { 'content-type': contentType, ...(businessId ? { 'x-business-id': businessId } : {}) } });
    }
    const fields = (recordUuid: string, recordType = 'invoice'): Part[] => [{ name: 'record_type', content: recordType }, { name: 'record_uuid', content: recordUuid }];
    const storedFiles = () => readdirSync(dir).filter((f) => f !== '.incoming');
    const incoming = () => readdirSync(path.join(dir, '.incoming'));

    async function member(): Promise<{ u: TestUser; businessId: string }> {
      const u = await newUser(s);
      return { u, businessId: (await newBusiness(s, u)).id };
    }

    test('upload answers 201 with uuid, filename, stored_name, size and sha256; download streams the exact bytes; list finds it', async () => {
      const { u, businessId } = await member();
      const rec = randomUUID();
      const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(MAX - 256)]);
      // The file part first and the fields after it: order does not matter.
      const r = await upload(u.token, businessId, [{ name: 'file', filename: 'Invoice 42.pdf', content: bytes }, ...fields(rec)]);
      assert.equal(r.status, 201, r.text);
      assert.match(r.body.uuid, UUID_RE);
      assert.equal(r.body.filename, 'Invoice 42.pdf');
      assert.match(r.body.stored_name, UUID_RE);
      assert.equal(r.body.size, MAX, 'exactly the maximum is allowed');
      assert.equal(r.body.sha256, createHash('sha256').update(bytes).digest('hex'));
      const d = await fetch(`${s.url}/api/sync/attachment/${r.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } });
      assert.equal(d.status, 200);
      assert.equal(d.headers.get('content-type'), 'application/octet-stream');
      assert.equal(d.headers.get('content-disposition'), `attachment; filename="Invoice 42.pdf"; filename*=UTF-8''Invoice%2042.pdf`);
      assert.equal(d.headers.get('x-content-type-options'), 'nosniff');
      assert.ok(Buffer.from(await d.arrayBuffer()).equals(bytes));
      const l = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${rec}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(l.body, [r.body]);
      const none = await call(s.url, 'GET', `/api/sync/attachments?record_type=receipt&record_uuid=${rec}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(none.body, []);
    });

    test('HEAD of an attachment answers its headers (Content-Length, ETag, Content-Disposition) without reading the file', async (t) => {
      const { u, businessId } = await member();
      const bytes = randomBytes(MAX);
      const r = await upload(u.token, businessId, [{ name: 'file', filename: 'scan.pdf', content: bytes }, ...fields(randomUUID())]);
      assert.equal(r.status, 201, r.text);
      const opened: Readable[] = [];
      const blobs = s.deps.blobs;
      const get = blobs.get.bind(blobs);
      blobs.get = async (name) => {
        const blob = await get(name);
        return blob && { ...blob, read: (range) => { const r = blob.read(range); opened.push(r); return r; } };
      };
      t.after(() => { blobs.get = get; });
      const h = await fetch(`${s.url}/api/sync/attachment/${r.body.uuid}`, { method: 'HEAD', headers: { authorization: `Bearer ${u.token}` } });
      assert.equal(h.status, 200);
      assert.equal(h.headers.get('content-length'), String(bytes.length));
      assert.equal(h.headers.get('etag'), `"${r.body.sha256}"`);
      assert.match(h.headers.get('content-disposition') ?? '', /scan\.pdf/);
      assert.equal((await h.arrayBuffer()).byteLength, 0);
      assert.equal(opened.length, 1);
      // Once the stream is done with (Fastify's own HEAD would read it to the end first), none of it was read.
      if (!opened[0]!.closed) await new Promise((resolve) => opened[0]!.once('close', resolve));
      assert.equal(opened[0]!.readableDidRead, false, 'the file was not read');
      const d = await fetch(`${s.url}/api/sync/attachment/${r.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } });
      assert.ok(Buffer.from(await d.arrayBuffer()).equals(bytes));
      assert.equal(opened[1]!.readableDidRead, true, 'a GET reads it');
    });

    test('traversal and hostile file names never reach a path and come back sanitised in a safe Content-Disposition', async () => {
      const { u, businessId } = await member();
      const cases: [string, string][] = [
        ['../../etc/passwd', 'passwd'],
        ['..\\x', 'x'],
        ['..', 'file'],
        ['a\u0000b.txt', 'ab.txt'],
        ['evil\u0007\u001b[31m.txt', 'evil[31m.txt'],
        ['résumé 📄.pdf', 'résumé 📄.pdf'],
        // A right-to-left override would show this as "exe.png"; zero-width and line separators hide or break names.
        ['\u202Egnp.exe', 'gnp.exe'],
        ['in\u200Bvoice\u2028.pdf', 'invoice.pdf'],
        ['quo\\"te.txt', 'quo"te.txt'],
        ['x'.repeat(1000), 'x'.repeat(255)],
      ];
      const before = new Set(storedFiles());
      for (const [raw, shown] of cases) {
        const r = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', filename: raw, content: 'data' }]);
        assert.equal(r.status, 201, `${JSON.stringify(raw)}: ${r.text}`);
        assert.equal(r.body.filename, shown, JSON.stringify(raw));
        assert.match(r.body.stored_name, UUID_RE);
        const d = await fetch(`${s.url}/api/sync/attachment/${r.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } });
        const cd = d.headers.get('content-disposition') ?? '';
        assert.match(cd, /^attachment; filename="[\x20-\x21\x23-\x5b\x5d-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9%!._~-]+$/, cd);
        assert.equal(await d.text(), 'data');
      }
      const added = storedFiles().filter((f) => !before.has(f));
      assert.equal(added.length, cases.length);
      for (const f of added) assert.match(f, UUID_RE, 'only generated names on disk');
      const unicode = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', filename: 'résumé.pdf', content: 'x' }]);
      const d = await fetch(`${s.url}/api/sync/attachment/${unicode.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } });
      assert.equal(d.headers.get('content-disposition'), `attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`);
    });

    test('a lone surrogate in a file name (a UTF-16 filename*) is removed: the name answered is the name kept, on every backend', async () => {
      const { u, businessId } = await member();
      const r = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', rawDisposition: `form-data; name="file"; filename*=utf-16le''%00%D8.%00p%00d%00f%00`, content: 'data' }]);
      assert.equal(r.status, 201, r.text);
      assert.equal(r.body.filename, '.pdf');
      const listed = await call(s.url, 'GET', `/api/sync/attachments?record_type=${r.body.record_type}&record_uuid=${r.body.record_uuid}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(listed.body.map((a: { filename: string }) => a.filename), ['.pdf']);
    });

    test('raw bytes of a file name that are not UTF-8 read as U+FFFD: the name is a label, the file\'s bytes are kept exactly', async () => {
      const { u, businessId } = await member();
      const boundary = 'b0undary';
      const head = (name: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n`);
      const body = Buffer.concat([
        head('record_type'), Buffer.from('invoice\r\n'), head('record_uuid'), Buffer.from(`${randomUUID()}\r\n`),
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a`), Buffer.from([0xff, 0xc0, 0x80]),
        Buffer.from(`.txt"\r\nContent-Type: application/octet-stream\r\n\r\n`), Buffer.from([0xff, 0x00, 0xfe]), Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
      const r = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body, headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'x-business-id': businessId } });
      assert.equal(r.status, 201, r.text);
      assert.match(r.body.filename, /^a\uFFFD+\.txt$/);
      const d = await fetch(`${s.url}/api/sync/attachment/${r.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } });
      assert.deepEqual([...new Uint8Array(await d.arrayBuffer())], [0xff, 0x00, 0xfe]);
    });

    test('a multipart boundary too long for the parser is a 400 naming the boundary, not a 500', async () => {
      const { u, businessId } = await member();
      for (const boundary of ['b'.repeat(253), `"${'b'.repeat(1000)}"`]) {
        const r = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body: 'x', headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'x-business-id': businessId } });
        assert.deepEqual([r.status, r.body.error, r.body.details], [400, 'invalid_request', 'malformed multipart/form-data body: the boundary is too long (RFC 2046 allows 70 characters)']);
      }
    });

    test('file names are percent-decoded (RFC 7578 section 4.2): a name fetch\'s FormData sent as a%22b.txt is a"b.txt', async () => {
      const { u, businessId } = await member();
      const form = new FormData();
      form.set('record_type', 'invoice');
      form.set('record_uuid', randomUUID());
      form.set('file', new Blob(['x']), 'a"b.txt');
      const r = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body: form, headers: { 'x-business-id': businessId } });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.body.filename, 'a"b.txt');
      const cases: [string, string][] = [['r%C3%A9sum%C3%A9.pdf', 'résumé.pdf'], ['100%.txt', '100%.txt'], ['..%2F..%2Fetc%2Fpasswd', 'passwd'], ['line%0Abreak.txt', 'linebreak.txt']];
      for (const [raw, shown] of cases) {
        const up = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', filename: raw, content: 'x' }]);
        assert.equal(up.body.filename, shown, raw);
      }
    });

    test('a file over the maximum gets 413 and leaves nothing behind, on disk or in the list', async () => {
      const { u, businessId } = await member();
      const rec = randomUUID();
      const before = storedFiles().length;
      const r = await upload(u.token, businessId, [...fields(rec), { name: 'file', filename: 'big.bin', content: randomBytes(MAX + 1) }]);
      assert.equal(r.status, 413);
      assert.equal(r.body.error, 'payload_too_large');
      assert.equal(storedFiles().length, before);
      assert.deepEqual(incoming(), []);
      const l = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${rec}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(l.body, []);
    });

    test('an upload the client abandons half way leaves nothing behind', async () => {
      const { u, businessId } = await member();
      const rec = randomUUID();
      const before = storedFiles().length;
      const { body, contentType } = multipart([...fields(rec), { name: 'file', filename: 'half.bin', content: randomBytes(MAX - 1) }]);
      const { port } = new URL(s.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      await once(socket, 'connect');
      socket.write(`POST /api/sync/attachment HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${u.token}\r\nX-Business-ID: ${businessId}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`);
      socket.write(body.subarray(0, body.length / 2));
      await until(() => incoming().length === 1);
      socket.destroy();
      await until(() => incoming().length === 0);
      assert.equal(storedFiles().length, before);
      const l = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${rec}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(l.body, []);
    });

    test('bad forms get 400 or 415 and store nothing', async () => {
      const { u, businessId } = await member();
      const before = storedFiles().length;
      const file: Part = { name: 'file', filename: 'a.txt', content: 'abc' };
      const bad: [Part[], RegExp][] = [
        [fields(randomUUID()), /no "file" part/],
        // busboy skips a part whose file name decodes to one with a line break: the answer says why.
        [[...fields(randomUUID()), { name: 'file', rawDisposition: `form-data; name="file"; filename*=UTF-8''a%0Db.txt`, content: 'abc' }], /no "file" part \(a part whose name or file name holds a line break is ignored\)/],
        [[...fields('not-a-uuid'), file], /record_uuid must be a UUID/],
        [[...fields(randomUUID(), '../x'), file], /record_type/],
        [[{ name: 'record_uuid', content: randomUUID() }, file], /record_type/],
        [[...fields(randomUUID()), file, { ...file, filename: 'b.txt' }], /exactly one file part/],
        [[...fields(randomUUID()), { ...file, name: 'upload' }], /exactly one file part/],
        [[...fields(randomUUID()), { name: 'note', content: 'x'.repeat(2000) }, file], /longer than/],
      ];
      for (const [parts, details] of bad) {
        const r = await upload(u.token, businessId, parts);
        assert.equal(r.status, 400, r.text);
        assert.match(r.body.details, details);
      }
      const json = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, headers: { 'x-business-id': businessId }, json: { file: 'abc' } });
      assert.equal(json.status, 415);
      assert.equal(storedFiles().length, before);
      assert.deepEqual(incoming(), []);
    });

    test('upload needs a token (401), membership (403) and a known business (404)', async () => {
      const { businessId } = await member();
      const outsider = await newUser(s);
      const before = storedFiles().length;
      const parts = [...fields(randomUUID()), { name: 'file', filename: 'a.txt', content: 'abc' }];
      const { body, contentType } = multipart(parts);
      assert.equal((await call(s.url, 'POST', '/api/sync/attachment', { body, headers: { 'content-type': contentType, 'x-business-id': businessId } })).status, 401);
      assert.equal((await upload(outsider.token, businessId, parts)).status, 403);
      assert.equal((await upload(outsider.token, '00000000-0000-4000-8000-000000000000', parts)).status, 404);
      assert.equal((await upload(outsider.token, undefined, parts)).status, 400);
      assert.equal(storedFiles().length, before);
    });

    test('a download resumes with a byte range: 206 with Content-Range for one range, the whole file otherwise, 416 past the end', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(50_000);
      const up = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', filename: 'big.bin', content: bytes }]);
      assert.equal(up.status, 201, up.text);
      const etag = `"${up.body.sha256}"`;
      const get = async (headers: Record<string, string>) => {
        const r = await fetch(`${s.url}/api/sync/attachment/${up.body.uuid}`, { headers: { authorization: `Bearer ${u.token}`, ...headers } });
        return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
      };
      const whole = await get({});
      assert.equal(whole.status, 200);
      assert.equal(whole.headers.get('accept-ranges'), 'bytes');
      assert.equal(whole.headers.get('etag'), etag, 'the ETag is the SHA-256 the upload answered');
      assert.ok(whole.body.equals(bytes));

      const cases: Array<[Record<string, string>, number, number]> = [
        [{ range: 'bytes=20000-' }, 20_000, 49_999],
        [{ range: 'bytes=20000-', 'if-range': etag }, 20_000, 49_999],
        [{ range: 'bytes=100-199' }, 100, 199],
        [{ range: 'bytes=-500' }, 49_500, 49_999],
        [{ range: 'bytes=49999-' }, 49_999, 49_999],
        [{ range: 'bytes=40000-90000' }, 40_000, 49_999],
        // Overlapping or adjacent ranges merge into one.
        [{ range: 'bytes=0-99,100-199,50-150' }, 0, 199],
      ];
      for (const [headers, start, end] of cases) {
        const r = await get(headers);
        assert.equal(r.status, 206, JSON.stringify(headers));
        assert.equal(r.headers.get('content-range'), `bytes ${start}-${end}/50000`);
        assert.equal(r.headers.get('content-length'), String(end - start + 1));
        assert.equal(r.headers.get('etag'), etag);
        assert.ok(r.body.equals(bytes.subarray(start, end + 1)), JSON.stringify(headers));
      }
      // The whole file (200): ranges that stay apart, a malformed one, another unit, an If-Range of other bytes or a date.
      const whole200: Array<Record<string, string>> = [
        { range: 'bytes=0-9,100-109' }, { range: 'bytes=abc' }, { range: 'bytes=500-100' }, { range: 'items=0-9' },
        { range: 'bytes=100-', 'if-range': `"${'0'.repeat(64)}"` }, { range: 'bytes=100-', 'if-range': `W/${etag}` },
        { range: 'bytes=100-', 'if-range': 'Sat, 28 Nov 2026 12:00:00 GMT' },
      ];
      for (const headers of whole200) {
        const r = await get(headers);
        assert.equal(r.status, 200, JSON.stringify(headers));
        assert.equal(r.headers.get('content-range'), null);
        assert.ok(r.body.equals(bytes), JSON.stringify(headers));
      }
      // HEAD answers the same headers without the bytes: a client can learn the size and ETag first.
      const head = await fetch(`${s.url}/api/sync/attachment/${up.body.uuid}`, { method: 'HEAD', headers: { authorization: `Bearer ${u.token}`, range: 'bytes=100-' } });
      assert.deepEqual([head.status, head.headers.get('content-range'), head.headers.get('content-length'), head.headers.get('etag')], [206, 'bytes 100-49999/50000', '49900', etag]);
      assert.equal((await head.arrayBuffer()).byteLength, 0);
      const past = await get({ range: 'bytes=50000-' });
      assert.equal(past.status, 416);
      assert.equal(past.headers.get('content-range'), 'bytes */50000');
      const error = JSON.parse(past.body.toString()) as { error: string; details: string };
      assert.equal(error.error, 'range_not_satisfiable');
      assert.match(error.details, /50000 bytes/);
      // The header is quoted back cut short: a client cannot make an error of kilobytes.
      const many = await get({ range: `bytes=${Array.from({ length: 200 }, (_, i) => `${60_000 + i}-`).join(',')}` });
      assert.equal(many.status, 416);
      assert.ok((JSON.parse(many.body.toString()) as { details: string }).details.length < 200);
      // An empty file has no byte to select: the whole (empty) file.
      const empty = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', filename: 'empty.txt', content: '' }]);
      const e = await fetch(`${s.url}/api/sync/attachment/${empty.body.uuid}`, { headers: { authorization: `Bearer ${u.token}`, range: 'bytes=0-' } });
      assert.deepEqual([e.status, (await e.arrayBuffer()).byteLength], [200, 0]);
      // A range reaches nothing another business holds: still 404, as without one.
      const outsider = await member();
      const other = await fetch(`${s.url}/api/sync/attachment/${up.body.uuid}`, { headers: { authorization: `Bearer ${outsider.u.token}`, range: 'bytes=0-' } });
      assert.equal(other.status, 404);
      assert.equal(other.headers.get('content-range'), null);
    });

    test('cross-business: another business\'s attachment is 404 to download, and its list is 403', async () => {
      const { u: ownerA, businessId: a } = await member();
      const rec = randomUUID();
      const up = await upload(ownerA.token, a, [...fields(rec), { name: 'file', filename: 'secret.txt', content: 'A only' }]);
      const { u: ownerB, businessId: b } = await member();
      const get = (token: string, headers: Record<string, string> = {}) => call(s.url, 'GET', `/api/sync/attachment/${up.body.uuid}`, { token, headers });
      assert.equal((await get(ownerB.token)).status, 404);
      assert.equal((await get(ownerB.token, { 'x-business-id': a })).status, 404);
      // A member of both, through B's token or header, still cannot reach A's file via B.
      await addMember(s, ownerA, a, ownerB);
      assert.equal((await get(ownerB.token)).status, 200, 'member of A now');
      assert.equal((await get(await businessToken(s, ownerB, b))).status, 404);
      assert.equal((await get(ownerB.token, { 'x-business-id': b })).status, 404);
      assert.equal((await get(ownerA.token, { 'x-business-id': a })).status, 200);
      const outsider = await newUser(s);
      const list = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${rec}`, { token: outsider.token, headers: { 'x-business-id': a } });
      assert.equal(list.status, 403);
      const listUnknown = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${rec}`, { token: ownerA.token, headers: { 'x-business-id': randomUUID() } });
      assert.deepEqual([listUnknown.status, listUnknown.body.details], [404, 'no such business']);
      const listViaB = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${rec}`, { token: await businessToken(s, ownerB, b) });
      assert.deepEqual(listViaB.body, []);
      assert.equal((await get(outsider.token)).status, 404);
      assert.equal((await call(s.url, 'GET', `/api/sync/attachment/${randomUUID()}`, { token: ownerA.token })).status, 404);
      assert.equal((await call(s.url, 'GET', '/api/sync/attachment/..%2F..%2Fetc%2Fpasswd', { token: ownerA.token })).status, 400);
      assert.equal((await call(s.url, 'GET', `/api/sync/attachment/${up.body.uuid}`)).status, 401);
      assert.equal((await call(s.url, 'GET', '/api/sync/attachments?record_type=invoice', { token: ownerA.token, headers: { 'x-business-id': a } })).status, 400);
    });

    test('a listed attachment whose bytes are not in this instance\'s store is a 500 internal; the log names the likely cause', async () => {
      const { u, businessId } = await member();
      const up = await upload(u.token, businessId, [...fields(randomUUID()), { name: 'file', filename: 'scan.pdf', content: 'elsewhere' }]);
      assert.equal(up.status, 201, up.text);
      // As when another instance stored it in its own, unshared --attachment-dir.
      rmSync(path.join(dir, up.body.stored_name));
      const r = await call(s.url, 'GET', `/api/sync/attachment/${up.body.uuid}`, { token: u.token });
      assert.equal(r.status, 500);
      assert.deepEqual(r.body, { error: 'internal', details: 'an unexpected error occurred; it has been logged' });
      const logged = s.logs.find((l) => l.includes(up.body.uuid) && l.includes('"level":50'));
      assert.ok(logged, 'the failure is logged as an error with the attachment');
      assert.match(logged, /not in the attachment store/);
      assert.match(logged, /--attachment-dir.*shared by every instance/);
    });
  });
}
