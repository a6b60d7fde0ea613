import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import { Readable } from 'node:stream';
import { ORPHAN_AFTER_MS, SWEEP_PAGE, removeOrphanBlobs } from '../../src/sync/attachments/orphan-blobs.js';
import type { BlobStore, StoredRange } from '../../src/sync/attachments/blob-store.js';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';

for (const backend of BACKENDS) {
  describe(`orphan attachment blobs on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    test('a blob left without its attachment row is removed once old enough; attached and recent blobs stay', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const form = new FormData();
      form.append('record_type', 'invoice');
      form.append('record_uuid', randomUUID());
      form.append('file', new Blob([Buffer.from('kept bytes')]), 'kept.txt');
      const uploaded = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, headers: { 'x-business-id': b.id }, body: form });
      assert.equal(uploaded.status, 201, uploaded.text);
      // What a crash between storing the bytes and inserting the row leaves behind.
      const orphan = await s.deps.blobs.put(Readable.from([Buffer.from('orphan bytes')]));

      assert.equal(await removeOrphanBlobs(s.deps.blobs, s.deps.attachments, Date.now()), 0, 'too young: may be an upload in progress');
      assert.ok(await s.deps.blobs.get(orphan.storedName));

      assert.equal(await removeOrphanBlobs(s.deps.blobs, s.deps.attachments, Date.now() + ORPHAN_AFTER_MS + 1000), 1);
      assert.equal(await s.deps.blobs.get(orphan.storedName), undefined);
      const download = await call(s.url, 'GET', `/api/sync/attachment/${uploaded.body.uuid}`, { token: u.token, headers: { 'x-business-id': b.id } });
      assert.equal(download.status, 200);
      assert.equal(download.text, 'kept bytes');
    });

    test('an upload whose form fields come slowly after its file is not swept meanwhile: its bytes are stored only once the form is whole', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const boundary = 'SlowFieldsBoundary';
      const part = (headers: string, value: string | Buffer) => Buffer.concat([Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`), Buffer.from(value), Buffer.from('\r\n')]);
      const record = randomUUID();
      const fileFirst = part('Content-Disposition: form-data; name="file"; filename="slow.txt"\r\nContent-Type: application/octet-stream', 'slow bytes');
      const fields = Buffer.concat([part('Content-Disposition: form-data; name="record_type"', 'invoice'), part('Content-Disposition: form-data; name="record_uuid"', record), Buffer.from(`--${boundary}--\r\n`)]);
      const socket = net.connect(Number(new URL(s.url).port), '127.0.0.1');
      await once(socket, 'connect');
      let answer = '';
      socket.on('data', (c: Buffer) => { answer += c.toString(); });
      socket.write(`POST /api/sync/attachment HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${u.token}\r\nX-Business-ID: ${b.id}\r\n`
        + `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${fileFirst.length + fields.length}\r\nConnection: close\r\n\r\n`);
      // The file part, and the next part's start (only a delimiter tells the parser that the file has ended).
      const cut = fileFirst.length + 60;
      const body = Buffer.concat([fileFirst, fields]);
      socket.write(body.subarray(0, cut));
      // The file part has arrived whole; another instance starting now sweeps as if ten minutes had passed.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await removeOrphanBlobs(s.deps.blobs, s.deps.attachments, Date.now() + ORPHAN_AFTER_MS + 1000), 0, 'the upload in progress left nothing to sweep');
      socket.write(body.subarray(cut));
      await once(socket, 'close');
      assert.match(answer, /^HTTP\/1\.1 201/, answer);
      const uuid = (JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { uuid: string }).uuid;
      const download = await call(s.url, 'GET', `/api/sync/attachment/${uuid}`, { token: u.token, headers: { 'x-business-id': b.id } });
      assert.deepEqual([download.status, download.text], [200, 'slow bytes']);
    });

    test('a later sweep reads only the blobs stored since the previous one, a bounded page at a time', async () => {
      const ranges: StoredRange[] = [];
      const spy: BlobStore = { ...s.deps.blobs, listStored: (r) => { ranges.push(r); return s.deps.blobs.listStored(r); } };
      const first = Date.now() + 3 * ORPHAN_AFTER_MS;
      await removeOrphanBlobs(spy, s.deps.attachments, first);
      const old = await s.deps.blobs.put(Readable.from([Buffer.from('stored before the mark')]));
      ranges.length = 0;
      const second = first + 3_600_000;
      await removeOrphanBlobs(spy, s.deps.attachments, second);
      assert.ok(ranges.length >= 1);
      for (const r of ranges) {
        assert.ok(r.limit <= SWEEP_PAGE);
        assert.equal(r.from, first - 2 * ORPHAN_AFTER_MS, 'starts at the previous mark, less the overlap');
        assert.equal(r.to, second - ORPHAN_AFTER_MS);
      }
      assert.ok(await s.deps.blobs.get(old.storedName), 'stored before the previous mark (less the overlap): not read again');
      ranges.length = 0;
      assert.equal(await removeOrphanBlobs(spy, s.deps.attachments, first), 0, 'an instance with a slower clock does not move the mark back');
      assert.equal(await s.deps.attachments.sweptUntil(), second - ORPHAN_AFTER_MS);
    });
  });
}
