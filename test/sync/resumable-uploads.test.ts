import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest, type TestUser } from '../helpers/sync.js';
import { MAX_OPEN_UPLOADS, UPLOAD_TTL_MS, sweepUploads } from '../../src/sync/attachments/resumable-uploads.js';
import { removeOrphanBlobs } from '../../src/sync/attachments/orphan-blobs.js';

const MAX = 256 * 1024;
const OCTETS = 'application/offset+octet-stream';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Waits for a condition the server reaches on its own (no timing is asserted); gives up after 10 s. */
async function until(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await sleep(10);
  }
  assert.fail('condition not reached');
}

// Both backends with their default blob store: local files on SQLite, the PostgreSQL blob store on PostgreSQL.
for (const backend of BACKENDS) {
  describe(`resumable uploads on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { attachmentMaxBytes: MAX }); });
    after(() => s.close());

    async function member(): Promise<{ u: TestUser; businessId: string }> {
      const u = await newUser(s);
      return { u, businessId: (await newBusiness(s, u)).id };
    }
    const start = (token: string, businessId: string | undefined, body: Record<string, unknown>) =>
      call(s.url, 'POST', '/api/sync/uploads', { token, json: body, headers: businessId ? { 'x-business-id': businessId } : {} });
    const announce = (bytes: Buffer, over: Record<string, unknown> = {}) =>
      ({ record_type: 'invoice', record_uuid: randomUUID(), filename: 'scan.pdf', size: bytes.length, sha256: sha(bytes), ...over });
    const send = (token: string, id: string, offset: number | string, body: Buffer, headers: Record<string, string> = {}) =>
      call(s.url, 'PATCH', `/api/sync/uploads/${id}`, { token, body, headers: { 'content-type': OCTETS, 'upload-offset': String(offset), ...headers } });
    const status = (token: string, id: string, headers: Record<string, string> = {}) => call(s.url, 'GET', `/api/sync/uploads/${id}`, { token, headers });
    /** A PATCH from byte 0 announcing `length` bytes on a raw socket, its body left for the test to write (or cut). */
    async function openPatch(token: string, id: string, length: number): Promise<{ socket: net.Socket; answer: () => string }> {
      const socket = net.connect(Number(new URL(s.url).port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      let answer = '';
      socket.on('data', (c: Buffer) => { answer += c.toString('latin1'); });
      socket.on('error', () => undefined);
      socket.write(`PATCH /api/sync/uploads/${id} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: ${OCTETS}\r\n`
        + `upload-offset: 0\r\ncontent-length: ${length}\r\n\r\n`);
      return { socket, answer: () => answer };
    }
    async function download(token: string, uuid: string): Promise<Buffer> {
      const d = await fetch(`${s.url}/api/sync/attachment/${uuid}`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(d.status, 200);
      return Buffer.from(await d.arrayBuffer());
    }

    test('a file sent in three pieces becomes one attachment with the exact bytes; each answer says how many are stored', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(100_000);
      const body = announce(bytes, { filename: '../scans/Q1 scan.pdf' });
      const before = s.clock.now();
      const r = await start(u.token, businessId, body);
      assert.equal(r.status, 201, r.text);
      assert.deepEqual({ ...r.body, id: undefined, expires_at: undefined }, {
        id: undefined, expires_at: undefined, record_type: 'invoice', record_uuid: body.record_uuid, filename: 'Q1 scan.pdf',
        size: 100_000, sha256: body.sha256, received: 0, attachment: null,
      });
      const expires = Date.parse(r.body.expires_at) - UPLOAD_TTL_MS;
      assert.ok(expires >= before && expires <= s.clock.now(), 'a day from now');
      const id = r.body.id;
      const a = await send(u.token, id, 0, bytes.subarray(0, 30_000));
      assert.equal(a.status, 200, a.text);
      assert.equal(a.body.received, 30_000);
      assert.equal(a.body.attachment, null);
      assert.equal((await status(u.token, id)).body.received, 30_000);
      assert.equal((await send(u.token, id, 30_000, bytes.subarray(30_000, 70_000))).body.received, 70_000);
      const pieces = (await s.deps.uploads.parts(id)).map((p) => p.stored_name);
      assert.equal(pieces.length, 2);
      const last = await send(u.token, id, 70_000, bytes.subarray(70_000));
      assert.equal(last.status, 200, last.text);
      assert.equal(last.body.received, 100_000);
      const att = last.body.attachment;
      assert.equal(att.size, 100_000);
      assert.equal(att.sha256, sha(bytes));
      assert.equal(att.filename, 'Q1 scan.pdf');
      assert.equal(att.record_uuid, body.record_uuid);
      assert.ok((await download(u.token, att.uuid)).equals(bytes));
      const listed = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${body.record_uuid}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(listed.body, [att]);
      // The pieces are gone once joined: only the attachment's blob remains.
      assert.deepEqual(await s.deps.uploads.parts(id), []);
      for (const piece of pieces) assert.equal(await s.deps.blobs.get(piece), undefined);
      assert.ok(!pieces.includes(att.stored_name));
      // A lost final answer is asked again: the session shows the attachment; another PATCH is a conflict, not a second file.
      assert.deepEqual((await status(u.token, id)).body.attachment, att);
      const again = await send(u.token, id, 70_000, bytes.subarray(70_000));
      assert.equal(again.status, 409);
      assert.equal(again.body.received, 100_000);
      assert.match(again.body.details, /complete/);
      assert.equal((await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${body.record_uuid}`, { token: u.token, headers: { 'x-business-id': businessId } })).body.length, 1);
      // DELETE of a complete upload forgets the session; the attachment it became stays.
      assert.equal((await call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token: u.token })).status, 204);
      assert.equal((await status(u.token, id)).status, 404);
      assert.ok((await download(u.token, att.uuid)).equals(bytes));
    });

    test('a request that breaks off keeps the bytes that arrived, and the upload goes on from there', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(200_000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      const { socket } = await openPatch(u.token, id, bytes.length);
      socket.write(bytes.subarray(0, 120_000));
      // Let the server take the bytes in before the connection goes.
      await sleep(200);
      socket.destroy();
      await until(async () => (await status(u.token, id)).body.received > 0);
      const kept = (await status(u.token, id)).body.received;
      assert.equal(kept, 120_000, 'every byte that arrived is kept, and none other');
      const wrong = await send(u.token, id, 0, bytes);
      assert.equal(wrong.status, 409, 'sending from the start again is refused');
      assert.equal(wrong.body.received, kept);
      const rest = await send(u.token, id, kept, bytes.subarray(kept));
      assert.equal(rest.status, 200, rest.text);
      assert.ok((await download(u.token, rest.body.attachment.uuid)).equals(bytes));
    });

    test('an offset other than the stored length is 409 with the length; bytes past the announced size are 413; nothing stored changes', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(10_000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, id, 0, bytes.subarray(0, 4000));
      for (const offset of [0, 3999, 4001, 10_000]) {
        const r = await send(u.token, id, offset, bytes.subarray(offset, offset + 10));
        assert.equal(r.status, 409, `offset ${offset}: ${r.text}`);
        assert.equal(r.body.error, 'conflict');
        assert.equal(r.body.received, 4000);
        assert.match(r.body.details, /send from byte 4000/);
      }
      const over = await send(u.token, id, 4000, Buffer.concat([bytes.subarray(4000), Buffer.from('!')]));
      assert.equal(over.status, 413, over.text);
      assert.equal(over.body.error, 'payload_too_large');
      assert.equal((await status(u.token, id)).body.received, 4000);
      const done = await send(u.token, id, 4000, bytes.subarray(4000));
      assert.ok((await download(u.token, done.body.attachment.uuid)).equals(bytes));
    });

    test('bytes whose SHA-256 is not the one announced are refused with 400 and the upload is removed; no attachment is made', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(5000);
      const body = announce(bytes, { sha256: sha(Buffer.from('other')).toUpperCase() });
      const id = (await start(u.token, businessId, body)).body.id;
      const r = await send(u.token, id, 0, bytes);
      assert.equal(r.status, 400, r.text);
      assert.match(r.body.details, /SHA-256 .* not .* as announced; the upload is removed/);
      assert.equal((await status(u.token, id)).status, 404);
      assert.deepEqual(await s.deps.uploads.parts(id), []);
      const listed = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${body.record_uuid}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(listed.body, []);
    });

    test('without a SHA-256 the upload is stored as it came; an empty file is completed by an empty PATCH', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(3000);
      const { sha256: _omitted, ...noHash } = announce(bytes);
      const r = await start(u.token, businessId, noHash);
      assert.equal(r.body.sha256, null);
      const done = await send(u.token, r.body.id, 0, bytes);
      assert.equal(done.body.attachment.sha256, sha(bytes));
      const empty = await start(u.token, businessId, announce(Buffer.alloc(0)));
      const e = await send(u.token, empty.body.id, 0, Buffer.alloc(0));
      assert.equal(e.status, 200, e.text);
      assert.equal(e.body.attachment.size, 0);
      assert.equal((await download(u.token, e.body.attachment.uuid)).length, 0);
    });

    test('a session whose bytes are all in but never joined (a crash between) is completed by an empty PATCH at its size', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(2000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      const piece = await s.deps.blobs.put(Readable.from([bytes]));
      assert.ok(await s.deps.uploads.addPart({ upload_id: id, start: 0, size: 2000, stored_name: piece.storedName, sha256: piece.sha256 }, s.clock.now() + UPLOAD_TTL_MS));
      assert.equal((await status(u.token, id)).body.attachment, null);
      const r = await send(u.token, id, 2000, Buffer.alloc(0));
      assert.equal(r.status, 200, r.text);
      assert.ok((await download(u.token, r.body.attachment.uuid)).equals(bytes));
      assert.equal(r.body.attachment.stored_name, piece.storedName, 'one piece holding the whole file becomes the attachment\'s bytes');
    });

    test('a file sent in one request becomes its attachment without a copy, and the sweep of its expired session leaves those bytes', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(50_000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      const done = await send(u.token, id, 0, bytes);
      assert.equal(done.status, 200, done.text);
      const att = done.body.attachment;
      assert.deepEqual(await s.deps.uploads.parts(id), [], 'the piece it adopted is no piece any more');
      // The completed session expires a day on and is swept, with every piece whose session is gone.
      s.clock.advance(UPLOAD_TTL_MS + 1);
      assert.ok(await sweepUploads(s.deps, s.clock.now()) >= 1);
      assert.equal(await s.deps.uploads.find(id), undefined);
      const token = (await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } })).body.token;
      assert.ok((await download(token, att.uuid)).equals(bytes));
    });

    test('two requests racing with the same bytes store them once and make one attachment', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(150_000);
      const body = announce(bytes);
      const id = (await start(u.token, businessId, body)).body.id;
      const answers = await Promise.all([send(u.token, id, 0, bytes), send(u.token, id, 0, bytes), send(u.token, id, 0, bytes)]);
      const ok = answers.filter((a) => a.status === 200);
      assert.ok(ok.length >= 1, answers.map((a) => a.text).join('\n'));
      for (const a of answers) assert.ok(a.status === 200 || a.status === 409, a.text);
      const uuids = new Set(ok.map((a) => a.body.attachment.uuid));
      assert.equal(uuids.size, 1);
      const listed = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${body.record_uuid}`, { token: u.token, headers: { 'x-business-id': businessId } });
      assert.equal(listed.body.length, 1);
      assert.ok((await download(u.token, listed.body[0].uuid)).equals(bytes));
    });

    test('PATCH takes only application/offset+octet-stream (415) and a decimal Upload-Offset (400)', async () => {
      const { u, businessId } = await member();
      const id = (await start(u.token, businessId, announce(randomBytes(10)))).body.id;
      const json = await call(s.url, 'PATCH', `/api/sync/uploads/${id}`, { token: u.token, json: { a: 1 }, headers: { 'upload-offset': '0' } });
      assert.equal(json.status, 415, json.text);
      assert.equal(json.body.error, 'unsupported_media_type');
      const none = await call(s.url, 'PATCH', `/api/sync/uploads/${id}`, { token: u.token, body: Buffer.from('abc'), headers: { 'upload-offset': '0' } });
      assert.equal(none.status, 415, none.text);
      for (const offset of ['-1', '1e3', ' ', '0x10', '12345678901234567']) {
        const r = await send(u.token, id, offset, Buffer.from('a'));
        assert.equal(r.status, 400, `${offset}: ${r.text}`);
        assert.match(r.body.details, /upload-offset/);
      }
      const missing = await call(s.url, 'PATCH', `/api/sync/uploads/${id}`, { token: u.token, body: Buffer.from('a'), headers: { 'content-type': OCTETS } });
      assert.equal(missing.status, 400);
      assert.equal((await status(u.token, id)).body.received, 0);
    });

    test('starting an upload checks its fields (400), its size (413) and the caller\'s business (401, 403, 404)', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(10);
      for (const bad of [{ record_type: '1x' }, { record_uuid: 'nope' }, { size: -1 }, { size: 1.5 }, { sha256: 'abc' }, { filename: 'x'.repeat(1025) }, { extra: 1 }]) {
        const r = await start(u.token, businessId, announce(bytes, bad));
        assert.equal(r.status, 400, `${JSON.stringify(bad)}: ${r.text}`);
      }
      const { size: _s, ...noSize } = announce(bytes);
      assert.equal((await start(u.token, businessId, noSize)).status, 400);
      const big = await start(u.token, businessId, announce(bytes, { size: MAX + 1 }));
      assert.equal(big.status, 413, big.text);
      assert.match(big.body.details, new RegExp(`at most ${MAX} bytes`));
      assert.equal((await start(u.token, businessId, announce(bytes, { size: MAX }))).status, 201, 'exactly the maximum is allowed');
      assert.equal((await call(s.url, 'POST', '/api/sync/uploads', { json: announce(bytes), headers: { 'x-business-id': businessId } })).status, 401);
      const stranger = await newUser(s);
      assert.equal((await start(stranger.token, businessId, announce(bytes))).status, 403);
      assert.equal((await start(u.token, randomUUID(), announce(bytes))).status, 404);
    });

    test('another user, another business\'s token or header, or a member since removed, finds no upload (404), as for an unknown id', async () => {
      const { u, businessId } = await member();
      const colleague = await newUser(s);
      await addMember(s, u, businessId, colleague);
      const other = await newBusiness(s, u);
      const bytes = randomBytes(1000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, id, 0, bytes.subarray(0, 100));
      const otherToken = await businessToken(s, u, other.id);
      const attempts: [string, Record<string, string>][] = [
        [colleague.token, {}], [colleague.token, { 'x-business-id': businessId }], [otherToken, {}], [u.token, { 'x-business-id': other.id }],
      ];
      for (const [token, headers] of attempts) {
        for (const r of [
          await status(token, id, headers),
          await send(token, id, 100, bytes.subarray(100), headers),
          await call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token, headers }),
        ]) {
          assert.equal(r.status, 404, r.text);
          assert.equal(r.body.error, 'not_found');
        }
      }
      assert.equal((await status(u.token, randomUUID())).status, 404);
      assert.equal((await status(u.token, 'not-a-uuid')).status, 400);
      assert.equal((await call(s.url, 'GET', `/api/sync/uploads/${id}`)).status, 401);
      // The owner's own business token works; nothing the others tried moved the upload.
      const own = await status(await businessToken(s, u, businessId), id);
      assert.equal(own.status, 200);
      assert.equal(own.body.received, 100);
      // A colleague's upload is theirs: removing them from the business closes it to them.
      const theirs = (await start(colleague.token, businessId, announce(bytes))).body.id;
      assert.equal((await status(colleague.token, theirs)).status, 200);
      const removed = await call(s.url, 'DELETE', `/api/business/${businessId}/members/${colleague.id}`, { token: u.token });
      assert.equal(removed.status, 204, removed.text);
      assert.equal((await status(colleague.token, theirs)).status, 404);
      assert.equal((await send(colleague.token, theirs, 0, bytes)).status, 404);
    });

    test('DELETE cancels an upload: 204, its pieces are deleted, and it is gone', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(5000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, id, 0, bytes.subarray(0, 2000));
      const [piece] = await s.deps.uploads.parts(id);
      assert.ok(piece && await s.deps.blobs.get(piece.stored_name));
      const r = await call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token: u.token });
      assert.equal(r.status, 204, r.text);
      assert.equal((await status(u.token, id)).status, 404);
      assert.equal(await s.deps.blobs.get(piece.stored_name), undefined);
      assert.deepEqual(await s.deps.uploads.parts(id), []);
      assert.equal((await call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token: u.token })).status, 404);
    });

    test('an upload cancelled while a PATCH is arriving: the PATCH answers 404 and keeps nothing', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(10_000);
      const id = (await start(u.token, businessId, announce(bytes))).body.id;
      const { socket, answer } = await openPatch(u.token, id, bytes.length);
      socket.write(bytes.subarray(0, 5000));
      await sleep(100);
      assert.equal((await call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token: u.token })).status, 204);
      socket.write(bytes.subarray(5000));
      for (let i = 0; i < 500 && !answer().includes('}'); i++) await sleep(10);
      socket.destroy();
      assert.match(answer(), /^HTTP\/1\.1 404 /);
      assert.match(answer(), /"error":"not_found"/);
      assert.deepEqual(await s.deps.uploads.parts(id), []);
      assert.equal((await status(u.token, id)).status, 404);
    });

    /** Pieces of `bytes` recorded for the session as arrived PATCHes would leave them (split at `cuts`), not yet joined. */
    async function allPiecesIn(id: string, bytes: Buffer, cuts: number[]): Promise<string[]> {
      const names: string[] = [];
      for (const [start, end] of [0, ...cuts].map((c, i, a) => [c, a[i + 1] ?? bytes.length] as const)) {
        const piece = await s.deps.blobs.put(Readable.from([bytes.subarray(start, end)]));
        assert.ok(await s.deps.uploads.addPart({ upload_id: id, start, size: end - start, stored_name: piece.storedName, sha256: piece.sha256 }, s.clock.now() + UPLOAD_TTL_MS));
        names.push(piece.storedName);
      }
      return names;
    }
    /** Nothing of the upload left: no session, no piece, no attachment for its record, none of `blobs`. */
    async function nothingLeft(token: string, businessId: string, id: string, recordUuid: string, blobs: string[]): Promise<void> {
      assert.equal(await s.deps.uploads.find(id), undefined);
      assert.deepEqual(await s.deps.uploads.parts(id), []);
      for (const b of blobs) assert.equal(await s.deps.blobs.get(b), undefined, `blob ${b} deleted`);
      const listed = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${recordUuid}`, { token, headers: { 'x-business-id': businessId } });
      assert.deepEqual(listed.body, []);
    }
    /** Replaces `obj[name]` (a method of the running service's stores) for one test; the returned function puts it back. */
    function intercept<T extends object, K extends keyof T>(obj: T, name: K, make: (original: T[K]) => T[K]): () => void {
      const original = obj[name];
      obj[name] = make((original as (...a: unknown[]) => unknown).bind(obj) as T[K]);
      return () => { obj[name] = original; };
    }

    test('a cancel whose first step lands just before the last piece completes the upload: either the attachment keeps its bytes or nothing is left, never an attachment without them', async (t) => {
      const { u, businessId } = await member();
      const bytes = randomBytes(4000);
      const body = announce(bytes);
      const id = (await start(u.token, businessId, body)).body.id;
      // The PATCH's completion waits until the cancel has made its first storage step, then commits while the cancel
      // is held; the cancel goes on once the completion is done. One piece holding the whole file is adopted whole.
      let cancelling = false;
      let firstStep: (() => void) | undefined;
      const cancelStepped = new Promise<void>((resolve) => { firstStep = resolve; });
      let releaseCancel!: () => void;
      const cancelHeld = new Promise<void>((resolve) => { releaseCancel = resolve; });
      let cancel: Promise<Awaited<ReturnType<typeof call>>> | undefined;
      let adopted = '';
      const holdFirstStep = <A extends unknown[], R>(original: (...a: A) => Promise<R>) => async (...a: A): Promise<R> => {
        const r = await original(...a);
        if (cancelling && firstStep) { const f = firstStep; firstStep = undefined; f(); await cancelHeld; }
        return r;
      };
      const restores = [
        intercept(s.deps.uploads, 'parts', holdFirstStep),
        intercept(s.deps.uploads, 'remove', holdFirstStep),
        intercept(s.deps.uploads, 'complete', (original) => async (...a) => {
          adopted = a[1].stored_name;
          cancelling = true;
          cancel = call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token: u.token });
          await cancelStepped;
          try { return await original(...a); } finally { releaseCancel(); }
        }),
      ];
      t.after(() => { for (const r of restores) r(); });
      const patch = await send(u.token, id, 0, bytes);
      assert.equal((await cancel!).status, 204, 'the cancel is answered');
      for (const r of restores) r();
      if (patch.status === 200) {
        assert.ok((await download(u.token, patch.body.attachment.uuid)).equals(bytes), 'an attachment that was answered keeps its bytes');
      } else {
        assert.equal(patch.status, 404, patch.text);
        await nothingLeft(u.token, businessId, id, body.record_uuid, [adopted]);
      }
    });

    /**
     * How the last piece reads once it was deleted under a join: not at all (the local store finds no file), or cut
     * short (PostgreSQL's reader ends where the deleted blob's chunks do).
     */
    const LOST_PIECE = ['gone', 'cut short'] as const;
    const lostPiece = (how: (typeof LOST_PIECE)[number], size: number) =>
      how === 'gone' ? undefined : { size, read: () => Readable.from([Buffer.alloc(100)]) };

    for (const how of LOST_PIECE) {
      test(`an upload cancelled while its pieces are being joined (the last piece ${how}): the completing PATCH answers 404 (not 500) and nothing is left`, async (t) => {
        const { u, businessId } = await member();
        const bytes = randomBytes(6000);
        const body = announce(bytes);
        const id = (await start(u.token, businessId, body)).body.id;
        const pieces = await allPiecesIn(id, bytes, [2000, 4000]);
        const restore = intercept(s.deps.blobs, 'get', (original) => async (name) => {
          if (name !== pieces[2]) return original(name);
          assert.equal((await call(s.url, 'DELETE', `/api/sync/uploads/${id}`, { token: u.token })).status, 204);
          return lostPiece(how, 2000);
        });
        t.after(restore);
        const r = await send(u.token, id, 6000, Buffer.alloc(0));
        restore();
        assert.equal(r.status, 404, r.text);
        assert.equal(r.body.error, 'not_found');
        await nothingLeft(u.token, businessId, id, body.record_uuid, pieces);
      });

      test(`a retried PATCH completes the upload while the first is still joining (the last piece ${how}): both answer the one attachment (not 500 or 400)`, async (t) => {
        const { u, businessId } = await member();
        const bytes = randomBytes(6000);
        const body = announce(bytes);
        const id = (await start(u.token, businessId, body)).body.id;
        const pieces = await allPiecesIn(id, bytes, [3000]);
        // The first join reaches its last piece after the retry made the attachment and deleted the pieces it joined.
        let retried = false;
        const restore = intercept(s.deps.blobs, 'get', (original) => async (name) => {
          if (name !== pieces[1] || retried) return original(name);
          retried = true;
          const retry = await send(u.token, id, 6000, Buffer.alloc(0));
          assert.equal(retry.status, 200, retry.text);
          return lostPiece(how, 3000);
        });
        t.after(restore);
        const first = await send(u.token, id, 6000, Buffer.alloc(0));
        restore();
        assert.ok(retried);
        assert.equal(first.status, 200, first.text);
        const listed = await call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${body.record_uuid}`, { token: u.token, headers: { 'x-business-id': businessId } });
        assert.equal(listed.body.length, 1, 'one attachment');
        assert.equal(first.body.attachment.uuid, listed.body[0].uuid);
        assert.ok((await download(u.token, listed.body[0].uuid)).equals(bytes));
        assert.ok(await s.deps.uploads.find(id), 'the completed session is kept (its answer is repeated until it expires)');
      });
    }

    test(`a user may hold ${MAX_OPEN_UPLOADS} unfinished uploads: one more is 422 until one is finished or cancelled`, async () => {
      const { u, businessId } = await member();
      const ids: string[] = [];
      for (let i = 0; i < MAX_OPEN_UPLOADS; i++) {
        const r = await start(u.token, businessId, announce(Buffer.from('x')));
        assert.equal(r.status, 201, r.text);
        ids.push(r.body.id);
      }
      const over = await start(u.token, businessId, announce(Buffer.from('x')));
      assert.equal(over.status, 422, over.text);
      assert.equal(over.body.error, 'limit_exceeded');
      // Another user is not held back by this one's uploads.
      const { u: other, businessId: otherBusiness } = await member();
      assert.equal((await start(other.token, otherBusiness, announce(Buffer.from('x')))).status, 201);
      assert.equal((await send(u.token, ids[0]!, 0, Buffer.from('x'))).status, 200);
      assert.equal((await start(u.token, businessId, announce(Buffer.from('x')))).status, 201, 'a finished upload frees its place');
      assert.equal((await start(u.token, businessId, announce(Buffer.from('x')))).status, 422);
      assert.equal((await call(s.url, 'DELETE', `/api/sync/uploads/${ids[1]}`, { token: u.token })).status, 204);
      assert.equal((await start(u.token, businessId, announce(Buffer.from('x')))).status, 201, 'a cancelled upload frees its place');
    });

    test(`concurrent starts of one user cannot pass the limit: of ${MAX_OPEN_UPLOADS + 5} at once, ${MAX_OPEN_UPLOADS} are 201 and the rest 422`, async (t) => {
      const { u, businessId } = await member();
      // Every start waits past its business check until all have reached it, so all count and insert at once.
      const n = MAX_OPEN_UPLOADS + 5;
      let arrived = 0;
      let releaseAll!: () => void;
      const together = new Promise<void>((resolve) => { releaseAll = resolve; });
      const restore = intercept(s.deps.businesses, 'access', (original) => async (id, userId) => {
        const r = await original(id, userId);
        if (userId === u.id) {
          if (++arrived === n) releaseAll();
          await together;
        }
        return r;
      });
      t.after(restore);
      const answers = await Promise.all(Array.from({ length: n }, () => start(u.token, businessId, announce(Buffer.from('x')))));
      restore();
      const statuses = answers.map((r) => r.status).sort();
      assert.deepEqual(statuses, [...Array<number>(MAX_OPEN_UPLOADS).fill(201), ...Array<number>(n - MAX_OPEN_UPLOADS).fill(422)]);
      assert.equal((await start(u.token, businessId, announce(Buffer.from('x')))).status, 422, 'the limit holds afterwards');
    });

    test('an upload a day without a byte expires (404), and the sweep deletes it with its pieces; a live one is kept', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(3000);
      const idle = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, idle, 0, bytes.subarray(0, 1000));
      const [piece] = await s.deps.uploads.parts(idle);
      s.clock.advance(UPLOAD_TTL_MS / 2);
      u.token = (await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } })).body.token;
      const live = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, live, 0, bytes.subarray(0, 1000));
      s.clock.advance(UPLOAD_TTL_MS / 2);
      // Access tokens live less than a day: sign in again.
      const login = await call(s.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } });
      u.token = login.body.token;
      assert.equal((await status(u.token, idle)).status, 404);
      assert.equal((await send(u.token, idle, 1000, bytes.subarray(1000))).status, 404);
      assert.ok(await sweepUploads(s.deps, s.clock.now()) >= 1);
      assert.equal(await s.deps.uploads.find(idle), undefined);
      assert.equal(await s.deps.blobs.get(piece!.stored_name), undefined);
      assert.deepEqual(await s.deps.uploads.parts(idle), []);
      const going = await send(u.token, live, 1000, bytes.subarray(1000));
      assert.equal(going.status, 200, going.text);
      assert.ok((await download(u.token, going.body.attachment.uuid)).equals(bytes));
    });

    test('the sweep deletes the pieces a crash left behind their session; the orphan-blob sweep never takes a live upload\'s piece', async () => {
      const { u, businessId } = await member();
      const bytes = randomBytes(3000);
      const forgotten = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, forgotten, 0, bytes.subarray(0, 1000));
      const [stray] = await s.deps.uploads.parts(forgotten);
      // A crash after the session row went and before its pieces did.
      await s.deps.uploads.remove(forgotten);
      const live = (await start(u.token, businessId, announce(bytes))).body.id;
      await send(u.token, live, 0, bytes.subarray(0, 1000));
      const [kept] = await s.deps.uploads.parts(live);
      const orphan = await s.deps.blobs.put(Readable.from([Buffer.from('orphan')]));
      await sweepUploads(s.deps, s.clock.now());
      assert.equal(await s.deps.blobs.get(stray!.stored_name), undefined);
      assert.deepEqual(await s.deps.uploads.parts(forgotten), []);
      // An hour on, every blob above is older than the orphan sweep's margin: only the blob nothing refers to goes.
      await removeOrphanBlobs(s.deps.blobs, s.deps.attachments, Date.now() + 3_600_000);
      assert.equal(await s.deps.blobs.get(orphan.storedName), undefined, 'the sweep did look at these blobs');
      assert.ok(await s.deps.blobs.get(kept!.stored_name), 'a piece of an upload in progress is not an orphan');
      const done = await send(u.token, live, 1000, bytes.subarray(1000));
      assert.ok((await download(u.token, done.body.attachment.uuid)).equals(bytes));
    });
  });
}
