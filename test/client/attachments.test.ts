import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { newBusiness, newUser, startSync } from '../helpers/sync.js';
import { SyncClientError, createMemoryStore, type Progress } from '../../src/client/index.js';
import { device, oneBusiness, ownerAndMember } from './client-fixtures.js';

/** `res` with its body cut off (a connection that breaks) once more than `after` bytes have come through. */
function brokenOff(res: Response, after: number): Response {
  const reader = res.body!.getReader();
  let sent = 0;
  const broken = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done || sent > after) { controller.error(new TypeError('terminated')); return; }
      sent += value.length;
      controller.enqueue(value);
    },
  });
  return new Response(broken, { status: res.status, headers: res.headers });
}

/** A request body that fails (the connection breaks) once more than `after` bytes have been sent. */
function cutOff(body: ReadableStream<Uint8Array>, after: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done || sent >= after) { controller.error(new TypeError('connection reset')); return; }
      const chunk = value.subarray(0, after - sent);
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
}

describe('sync client: attachments', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: upload and download report progress; a broken upload resumes from the bytes the server kept; a lost answer is not stored twice; a broken download is retried`, async (t) => {
      const s = await startSync(backend);
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      let breakNextUploadAt: number | undefined;
      let loseNextUploadAnswer = false;
      let breakNextDownload = false;
      let offlineRequests = 0;
      const patches: number[] = [];
      const downloads: Array<{ range?: string; ifRange?: string }> = [];
      const flaky = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const url = String(input);
        if (offlineRequests > 0) {
          offlineRequests--;
          throw new TypeError('fetch failed (offline)');
        }
        if (init?.method === 'PATCH') {
          patches.push(Number((init.headers as Record<string, string>)['upload-offset']));
          if (breakNextUploadAt !== undefined) {
            // The connection breaks once this many bytes of the body are sent.
            const cut = breakNextUploadAt;
            breakNextUploadAt = undefined;
            try {
              return await fetch(input, { ...init, body: cutOff(init.body as ReadableStream<Uint8Array>, cut) });
            } catch (e: unknown) {
              // The retry comes after a backoff, by when the server has stored what arrived: wait for that here.
              const id = url.split('/').pop()!;
              for (let i = 0; i < 500 && !((await s.deps.uploads.find(id))?.received); i++) await sleep(10);
              throw e;
            }
          }
          if (loseNextUploadAnswer) {
            loseNextUploadAnswer = false;
            const res = await fetch(input, init);
            assert.equal(res.status, 200);
            await res.arrayBuffer();
            throw new TypeError('fetch failed (answer lost)');
          }
        }
        if (url.includes('/api/sync/attachment/')) downloads.push({ range: (init?.headers as Record<string, string>)['range'], ifRange: (init?.headers as Record<string, string>)['if-range'] });
        if (url.includes('/api/sync/attachment/') && breakNextDownload) {
          breakNextDownload = false;
          // Half the bytes arrive, then the connection breaks.
          return brokenOff(await fetch(input, init), 100_000);
        }
        return fetch(input, init);
      };
      const a = await device(s.url, u, b.id, { fetch: flaky, sleep: async () => undefined });
      t.after(() => a.close());

      const rec = randomUUID();
      const bytes = new Uint8Array(randomBytes(300_000));
      const up: Progress[] = [];
      breakNextUploadAt = 150_000;
      const att = await a.attachments.upload({ recordType: 'invoice', recordUuid: rec, filename: 'scan.pdf', bytes, onProgress: (p) => up.push(p) });
      assert.equal(att.size, bytes.length);
      assert.equal(att.sha256, createHash('sha256').update(bytes).digest('hex'));
      // The retry sent only what the server had not kept: from where the broken request's bytes ended.
      assert.equal(patches.length, 2, `PATCH offsets ${patches.join(', ')}`);
      assert.equal(patches[0], 0);
      assert.ok(patches[1]! > 0 && patches[1]! <= 150_000, `resumed at ${patches[1]}`);
      assert.ok(up.length > 3, 'streamed upload reports progress along the way');
      assert.deepEqual(up.at(-1), { loaded: bytes.length, total: bytes.length });
      assert.deepEqual((await a.attachments.list('invoice', rec)).map((x) => x.uuid), [att.uuid]);

      // The answer to the last bytes is lost: the retry finds the attachment the upload became, and sends nothing again.
      const rec2 = randomUUID();
      patches.length = 0;
      loseNextUploadAnswer = true;
      const reduced = await a.attachments.upload({ recordType: 'invoice', recordUuid: rec2, filename: 'scans/q1 "draft".pdf', bytes: bytes.subarray(0, 1000) });
      assert.equal(reduced.filename, 'q1 "draft".pdf');
      assert.deepEqual(patches, [0], 'no byte sent twice');
      assert.deepEqual((await a.attachments.list('invoice', rec2)).map((x) => x.uuid), [reduced.uuid], 'not stored twice');
      // Offline for the first tries (the announce, then the asks that follow): the upload goes on once back.
      const rec3 = randomUUID();
      offlineRequests = 4;
      const late = await a.attachments.upload({ recordType: 'invoice', recordUuid: rec3, filename: 'x.bin', bytes: bytes.subarray(0, 1000) });
      assert.equal(offlineRequests, 0);
      assert.deepEqual((await a.attachments.list('invoice', rec3)).map((x) => x.uuid), [late.uuid]);

      const down: Progress[] = [];
      breakNextDownload = true;
      const got = await a.attachments.download(att.uuid, { expect: att, onProgress: (p) => down.push(p) });
      assert.deepEqual(Buffer.from(got), Buffer.from(bytes));
      assert.ok(down.some((p) => p.loaded > 0 && p.loaded < bytes.length));
      assert.deepEqual(down.at(-1), { loaded: bytes.length, total: bytes.length });
      // The retry asked only for the rest, tied to the file by its ETag; progress never went back to 0.
      assert.equal(downloads.length, 2);
      assert.deepEqual(downloads[0], { range: undefined, ifRange: undefined });
      const resumedAt = Number(/^bytes=(\d+)-$/.exec(downloads[1]!.range ?? '')?.[1]);
      assert.ok(resumedAt > 100_000 && resumedAt < bytes.length, `resumed at ${downloads[1]!.range}`);
      assert.equal(downloads[1]!.ifRange, `"${att.sha256}"`);
      assert.ok(down.every((p, i) => i === 0 || p.loaded >= down[i - 1]!.loaded), 'progress only grows');
    });

    test(`on ${backend}: 413 and membership failures are typed errors, not retried`, async (t) => {
      const { s, owner, member, b } = await ownerAndMember(t, backend, { attachmentMaxBytes: 1000 });
      const a = await device(s.url, member, b.id);
      t.after(() => a.close());
      const rec = randomUUID();
      await assert.rejects(a.attachments.upload({ recordType: 'invoice', recordUuid: rec, filename: 'big.bin', bytes: new Uint8Array(2000) }),
        (e: unknown) => e instanceof SyncClientError && e.code === 'payload_too_large' && e.status === 413);
      const ok = await a.attachments.upload({ recordType: 'invoice', recordUuid: rec, filename: 'small.bin', bytes: new Uint8Array(10) });
      // Removed from the business: the next transfer is refused (403), the attachment of another business is 404.
      const removed = await fetch(`${s.url}/api/business/${b.id}/members/${member.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${owner.token}` } });
      assert.equal(removed.status, 204);
      await assert.rejects(a.attachments.upload({ recordType: 'invoice', recordUuid: rec, filename: 'x.bin', bytes: new Uint8Array(10) }),
        (e: unknown) => e instanceof SyncClientError && e.code === 'forbidden' && e.status === 403);
      await assert.rejects(a.attachments.download(ok.uuid), (e: unknown) => e instanceof SyncClientError && (e.code === 'forbidden' || e.code === 'not_found'));
    });
  }
});

test('a transfer the server answers 503 waits its retry_after (longer than the backoff) before the next attempt; one past maxRetryAfterSeconds fails at once', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  let refuse: number[] = [];
  let uploads = 0;
  const fetchWith503 = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (init?.method === 'PATCH') {
      uploads++;
      const wait = refuse.shift();
      if (wait !== undefined) {
        return Promise.resolve(new Response(JSON.stringify({ error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: wait }),
          { status: 503, headers: { 'content-type': 'application/json', 'retry-after': String(wait) } }));
      }
    }
    return fetch(input, init);
  };
  const waits: number[] = [];
  // The client's clock: the waits are recorded, not slept.
  const a = await open({ fetch: fetchWith503, sleep: async (ms) => { waits.push(ms); } });
  const input = { recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes: new Uint8Array(100) };
  refuse = [30, 1];
  const stored = await a.attachments.upload(input);
  assert.equal(stored.size, 100);
  assert.equal(uploads, 3);
  assert.deepEqual(waits.map((w) => w >= 30_000 ? 'retry_after 30' : w >= 1_000 ? 'retry_after 1' : 'backoff'), ['retry_after 30', 'retry_after 1']);
  uploads = 0;
  waits.length = 0;
  refuse = [900];
  await assert.rejects(a.attachments.upload({ ...input, filename: 'other.pdf' }), (e: unknown) => e instanceof SyncClientError && e.code === 'unavailable' && e.retryAfter === 900);
  assert.equal(uploads, 1, 'a wait past maxRetryAfterSeconds (120) is not waited');
  assert.deepEqual(waits, []);
});

test('a download broken off twice, behind a proxy that drops the Range of the first retry: that retry starts over, the next resumes; the bytes are exact', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const bytes = new Uint8Array(randomBytes(400_000));
  const uploader = await open();
  const att = await uploader.attachments.upload({ recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes });
  const asked: Array<string | undefined> = [];
  let attempt = 0;
  const flaky = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (!String(input).includes('/api/sync/attachment/')) return fetch(input, init);
    const headers = { ...(init?.headers as Record<string, string>) };
    attempt++;
    asked.push(headers['range']);
    // The first retry passes a proxy that does not forward ranges: the server answers the whole file.
    if (attempt === 2) delete headers['range'];
    const res = await fetch(input, { ...init, headers });
    return attempt > 2 ? res : brokenOff(res, 150_000);
  };
  const a = await open({ fetch: flaky, sleep: async () => undefined });
  const progress: Progress[] = [];
  const got = await a.attachments.download(att.uuid, { expect: att, onProgress: (p) => progress.push(p) });
  assert.deepEqual(Buffer.from(got), Buffer.from(bytes));
  assert.equal(asked.length, 3);
  assert.equal(asked[0], undefined);
  assert.match(asked[1] ?? '', /^bytes=\d+-$/, 'the first retry asked for the rest (the proxy dropped it)');
  const resumedAt = Number(/^bytes=(\d+)-$/.exec(asked[2] ?? '')?.[1]);
  assert.ok(resumedAt > 150_000 && resumedAt < bytes.length, `the last attempt resumed: ${asked[2]}`);
  assert.equal(progress.filter((p) => p.loaded === 0).length, 2, 'progress went back to 0 once, for the whole file sent again');
});

test('a download whose connection goes silent half way is cut after requestTimeoutMs and resumed from the bytes it has', { timeout: 20_000 }, async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const bytes = new Uint8Array(randomBytes(300_000));
  const att = await (await open()).attachments.upload({ recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes });
  const ranges: Array<string | undefined> = [];
  const silentHalfWay = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    if (!String(input).includes('/api/sync/attachment/')) return res;
    ranges.push((init?.headers as Record<string, string>)['range']);
    if (ranges.length > 1) return res;
    // The first answer's bytes stop after 100 KB, and the connection stays open: no error, no end.
    const reader = res.body!.getReader();
    let sent = 0;
    const stalled = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent > 100_000) return new Promise<void>(() => undefined);
        const { done, value } = await reader.read();
        if (done) { controller.close(); return; }
        sent += value.length;
        controller.enqueue(value);
      },
      cancel: () => reader.cancel(),
    });
    return new Response(stalled, { status: res.status, headers: res.headers });
  };
  const a = await open({ fetch: silentHalfWay, requestTimeoutMs: 300, sleep: async () => undefined });
  const got = await a.attachments.download(att.uuid, { expect: att });
  assert.deepEqual(Buffer.from(got), Buffer.from(bytes));
  assert.equal(ranges.length, 2);
  assert.equal(ranges[0], undefined);
  const resumedAt = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? '')?.[1]);
  assert.ok(resumedAt > 100_000 && resumedAt < bytes.length, `resumed at ${ranges[1]}`);
});

test('a resumed download answered with another range than the one asked for starts over from byte 0, and the bytes are exact', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const bytes = new Uint8Array(randomBytes(300_000));
  const att = await (await open()).attachments.upload({ recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes });
  const asked: Array<string | undefined> = [];
  const misranged = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (!String(input).includes('/api/sync/attachment/')) return fetch(input, init);
    const headers = { ...(init?.headers as Record<string, string>) };
    asked.push(headers['range']);
    // The first answer breaks off; the resume passes a proxy that rewrites its range to bytes 0-99.
    if (headers['range']) headers['range'] = 'bytes=0-99';
    const res = await fetch(input, { ...init, headers });
    return asked.length === 1 ? brokenOff(res, 100_000) : res;
  };
  const a = await open({ fetch: misranged, sleep: async () => undefined });
  const got = await a.attachments.download(att.uuid, { expect: att });
  assert.deepEqual(Buffer.from(got), Buffer.from(bytes));
  assert.equal(asked.length, 3, 'the broken attempt, the misranged resume, a whole download');
  assert.match(asked[1] ?? '', /^bytes=\d+-$/);
  assert.equal(asked[2], undefined, 'after a wrong range the client asks for the whole file, not a range again');
});

test('an upload cut short (attempts used up, the app closed) goes on from the bytes the server kept when the next client on the store uploads the same file', async (t) => {
  const { s, open } = await oneBusiness(t, 'sqlite');
  const store = createMemoryStore();
  const requests: string[] = [];
  let cutNextPatch = true;
  const recording = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    if (url.includes('/api/sync/upload')) requests.push(`${init?.method ?? 'GET'} ${(init?.headers as Record<string, string> | undefined)?.['upload-offset'] ?? ''}`.trim());
    if (init?.method === 'PATCH' && cutNextPatch) {
      cutNextPatch = false;
      try {
        return await fetch(input, { ...init, body: cutOff(init.body as ReadableStream<Uint8Array>, 120_000) });
      } catch (e: unknown) {
        const id = url.split('/').pop()!;
        for (let i = 0; i < 500 && !((await s.deps.uploads.find(id))?.received); i++) await sleep(10);
        throw e;
      }
    }
    return fetch(input, init);
  };
  const bytes = new Uint8Array(randomBytes(300_000));
  const input = { recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes };
  const first = await open({ store, fetch: recording, attachments: { attempts: 1 } });
  await assert.rejects(first.attachments.upload(input), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
  await first.close();
  assert.deepEqual(requests, ['POST', 'PATCH 0']);
  requests.length = 0;
  const second = await open({ store, fetch: recording });
  const att = await second.attachments.upload(input);
  // No new upload: the remembered one is asked where it stands, and only the rest is sent.
  assert.equal(requests[0], 'GET');
  assert.equal(requests.length, 2, requests.join(', '));
  const resumedAt = Number(requests[1]!.split(' ')[1]);
  assert.ok(resumedAt > 0 && resumedAt <= 120_000, requests[1]);
  assert.equal(att.sha256, createHash('sha256').update(bytes).digest('hex'));
  assert.deepEqual((await second.attachments.list('invoice', input.recordUuid)).map((a) => a.uuid), [att.uuid]);
  assert.deepEqual(await store.list('meta', 'upload\u0000'), [], 'a finished upload is forgotten');
  // The same file again is a new upload (a second attachment), not the finished one.
  requests.length = 0;
  await second.attachments.upload(input);
  assert.deepEqual(requests, ['POST', 'PATCH 0']);
});

/** A fetch whose first PATCH is answered `status` with the JSON `body` (the server untouched); the upload requests' methods in order. */
function firstPatchAnswered(status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const requests: string[] = [];
  let answered = false;
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (String(input).includes('/api/sync/upload')) requests.push(init?.method ?? 'GET');
    if (init?.method === 'PATCH' && !answered) {
      answered = true;
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
    }
    return fetch(input, init);
  };
  return { fetch: f, requests };
}

test('an upload PATCH answered 408 (the server: 30 s without a byte; the bytes that came are kept) is resumed, not given up and forgotten', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const { fetch: f, requests } = firstPatchAnswered(408, { error: 'request_timeout', details: 'the request body did not arrive in time' });
  const a = await open({ fetch: f, sleep: async () => undefined });
  const bytes = new Uint8Array(randomBytes(10_000));
  const att = await a.attachments.upload({ recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes });
  assert.equal(att.sha256, createHash('sha256').update(bytes).digest('hex'));
  assert.deepEqual(requests, ['POST', 'PATCH', 'GET', 'PATCH']);
});

test('an upload refused for now with a 429 past maxRetryAfterSeconds keeps its id: the next call goes on with the same upload', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const store = createMemoryStore();
  const { fetch: f, requests } = firstPatchAnswered(429, { error: 'rate_limited', details: 'slow down', retry_after: 900 }, { 'retry-after': '900' });
  const a = await open({ store, fetch: f, sleep: async () => undefined });
  const input = { recordType: 'invoice', recordUuid: randomUUID(), filename: 'scan.pdf', bytes: new Uint8Array(randomBytes(10_000)) };
  await assert.rejects(a.attachments.upload(input), (e: unknown) => e instanceof SyncClientError && e.code === 'rate_limited' && e.retryAfter === 900);
  assert.equal((await store.list('meta', 'upload\u0000')).length, 1, 'the upload under way is remembered (it was not refused)');
  requests.length = 0;
  await a.attachments.upload(input);
  assert.equal(requests[0], 'GET', `the next call goes on with the same upload: ${requests.join(', ')}`);
});
