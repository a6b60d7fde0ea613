// Why: attachment transfers fail halfway on real networks; this retries them with backoff, reports progress, and never stores an upload twice.
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { SyncClientError, retriedLater } from './errors.js';
import type { Session } from './session.js';
import { json, type RequestBody } from './transport.js';
import type { Attachment, UploadSession, UploadStart } from './wire.js';
import type { LocalStore } from './local-store.js';

export interface AttachmentOptions {
  /** Attempts per transfer, the first included (default 5). */
  attempts?: number;
  /** Waits between attempts; never shorter than a 503's `retry_after` (a server whose disk is full says 30 s). */
  retry?: BackoffOptions;
  /** A `retry_after` longer than this many seconds fails the transfer at once instead (the client's option, default 120). */
  maxRetryAfterSeconds?: number;
  /**
   * Stream upload bodies so progress follows the bytes sent (default: on outside
   * browsers; browsers stream request bodies only over HTTP/2, so there the
   * body is sent whole and progress jumps from 0 to the total).
   */
  streamUploads?: boolean;
}

export interface Progress {
  loaded: number;
  total: number;
}

export interface UploadInput {
  recordType: string;
  recordUuid: string;
  filename: string;
  bytes: Uint8Array;
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
}

const CHUNK = 64 * 1024;

/** Upload, download and list the attachments of the client's business. */
export class AttachmentClient {
  /** `store` keeps the ids of uploads under way, so an upload an app restart interrupted goes on where it stopped. */
  constructor(private readonly session: Session, private readonly business: () => string, private readonly o: AttachmentOptions = {}, private readonly store?: LocalStore) {}

  async list(recordType: string, recordUuid: string): Promise<Attachment[]> {
    const q = `record_type=${encodeURIComponent(recordType)}&record_uuid=${encodeURIComponent(recordUuid)}`;
    return this.session.businessRequest(this.business(), 'GET', `/api/sync/attachments?${q}`, { read: json<Attachment[]> });
  }

  /**
   * Uploads a file for a record as a resumable upload (docs/sync-api.md, "Resumable uploads"): the file is announced
   * with its size and SHA-256, then its bytes are sent from where the server's end. A network failure waits a backoff,
   * asks the server how many bytes it kept (those of a request that broke off included) and sends only the rest; an
   * answer lost after the last byte is found there too, so a file is never stored twice. An upload the server no
   * longer knows (expired after a day, or cancelled) is started again. The upload's id stays in the local store until
   * it finishes, so a call that gave up (or an app that closed) leaves it for the next call with the same file for the
   * same record to go on from. 413 (`payload_too_large`), 403 (`forbidden`) and
   * 422 (`limit_exceeded`: too many unfinished uploads) are thrown at once; so is 400 when the bytes the server got do
   * not match the SHA-256 (it then removes the upload).
   */
  async upload(input: UploadInput): Promise<Attachment> {
    const sha256 = await hexSha256(input.bytes);
    const attempts = this.o.attempts ?? 5;
    const total = input.bytes.length;
    input.onProgress?.({ loaded: 0, total });
    const key = uploadKey(this.business(), input, sha256);
    /** The server's upload of this file, started by this call or by an earlier one that did not finish. */
    let id = await this.store?.get('meta', key) as string | undefined;
    let session: UploadSession | undefined;
    /** The session's `received` is not known since the last failure: ask before sending. */
    let stale = true;
    for (let attempt = 0; ; attempt++) {
      try {
        if (!id) {
          session = await this.session.businessRequest(this.business(), 'POST', '/api/sync/uploads', {
            json: { record_type: input.recordType, record_uuid: input.recordUuid, filename: input.filename, size: total, sha256 } satisfies UploadStart,
            signal: input.signal, read: json<UploadSession>,
          });
          id = session.id;
          await this.store?.write([{ op: 'put', collection: 'meta', key, value: id }]);
        } else if (!session || stale) {
          session = await this.session.businessRequest(this.business(), 'GET', `/api/sync/uploads/${id}`, { signal: input.signal, read: json<UploadSession> });
          input.onProgress?.({ loaded: session.received, total });
        }
        stale = false;
        while (!session.attachment) session = await this.sendFrom(session, input);
        await this.store?.write([{ op: 'delete', collection: 'meta', key }]);
        input.onProgress?.({ loaded: total, total });
        return session.attachment;
      } catch (e: unknown) {
        const error = e instanceof SyncClientError ? e : undefined;
        // Another request of this upload moved it on (a retried one that did arrive): ask where it stands, at once.
        if (error?.code === 'conflict' && id && attempt + 1 < attempts) { stale = true; continue; }
        // Expired or cancelled: a new upload.
        if (error?.code === 'not_found' && id && attempt + 1 < attempts) { id = undefined; continue; }
        // The server refused the file for good (413, 403, a SHA-256 mismatch...): nothing is left to resume. A 429, a
        // 408 or a 409 on the last attempt is no refusal: the next call goes on with the same upload.
        if (error?.status !== undefined && refusesUpload(error)) await this.store?.write([{ op: 'delete', collection: 'meta', key }]).catch(() => undefined);
        await this.beforeRetry(e, attempt, attempts, input.signal);
        stale = true;
      }
    }
  }

  /**
   * Downloads an attachment's bytes, checking them against the listed size and SHA-256 when `expect` is given. A
   * download that breaks off is retried from the bytes it has (a Range request, tied to the file by its ETag), not
   * from the start; a server that answers with the whole file instead is read from the start.
   */
  async download(uuid: string, options: { onProgress?: (p: Progress) => void; signal?: AbortSignal; expect?: Pick<Attachment, 'size' | 'sha256'> } = {}): Promise<Uint8Array> {
    const attempts = this.o.attempts ?? 5;
    const got: Received = { parts: [], loaded: 0, total: 0, etag: null };
    for (let attempt = 0; ; attempt++) {
      try {
        await this.downloadOnce(uuid, options, got);
        const bytes = joined(got);
        if (options.expect && (bytes.length !== options.expect.size || (await hexSha256(bytes)) !== options.expect.sha256)) {
          throw new SyncClientError('integrity', `attachment ${uuid}: the bytes received do not match its size and SHA-256`);
        }
        return bytes;
      } catch (e: unknown) {
        await this.beforeRetry(e, attempt, attempts, options.signal);
      }
    }
  }

  /**
   * After a failed attempt: rethrows what is not worth another (not retriedLater, the last attempt, cancelled, or a
   * `retry_after` past maxRetryAfterSeconds), else waits the backoff or the server's `retry_after`, whichever is longer.
   */
  private async beforeRetry(e: unknown, attempt: number, attempts: number, signal: AbortSignal | undefined): Promise<void> {
    const told = e instanceof SyncClientError ? e.retryAfter ?? 0 : 0;
    if (!retriedLater(e) || attempt + 1 >= attempts || signal?.aborted || told > (this.o.maxRetryAfterSeconds ?? 120)) throw e;
    await this.session.transportSleep(Math.max(told * 1000, backoffDelay(attempt, this.o.retry ?? { baseMs: 250, maxMs: 10_000 })));
  }

  /** One PATCH: the file's bytes from the session's `received` to the end; the server's answer after it. */
  private async sendFrom(session: UploadSession, input: UploadInput): Promise<UploadSession> {
    const from = session.received;
    const total = input.bytes.length;
    const rest = input.bytes.subarray(from);
    const stream = this.o.streamUploads ?? !('document' in globalThis);
    let body: () => RequestBody;
    if (stream) {
      body = () => {
        let offset = 0;
        return new ReadableStream<Uint8Array>({
          pull(controller) {
            if (offset >= rest.length) { controller.close(); return; }
            const chunk = rest.subarray(offset, Math.min(rest.length, offset + CHUNK));
            offset += chunk.length;
            controller.enqueue(chunk);
            input.onProgress?.({ loaded: from + offset, total });
          },
        });
      };
    } else {
      body = () => new Blob([rest as Uint8Array<ArrayBuffer>]);
    }
    return this.session.businessRequest(this.business(), 'PATCH', `/api/sync/uploads/${session.id}`, {
      body, headers: { 'content-type': 'application/offset+octet-stream', 'upload-offset': String(from) }, signal: input.signal,
      ...(stream ? { init: { duplex: 'half' } } : {}), read: json<UploadSession>,
    });
  }

  private async downloadOnce(uuid: string, options: { onProgress?: (p: Progress) => void; signal?: AbortSignal }, got: Received): Promise<void> {
    const resume = got.etag !== null && got.loaded > 0 && got.loaded < got.total;
    // Read under the request's signals: the caller's signal and the client's close stop a download under way.
    await this.session.businessRequest(this.business(), 'GET', `/api/sync/attachment/${encodeURIComponent(uuid)}`, {
      signal: options.signal, read: (res) => readDownload(res, uuid, options, got),
      ...(resume ? { headers: { range: `bytes=${got.loaded}-`, 'if-range': got.etag! } } : {}),
    });
  }
}

/** What a download has received so far, kept across its attempts. */
interface Received {
  parts: Uint8Array[];
  loaded: number;
  /** The file's size, once an answer said it (0: unknown, so nothing to resume). */
  total: number;
  /** The file's strong ETag, which a resumed request names in If-Range (a weak one cannot). */
  etag: string | null;
}

/**
 * The body of a download, with progress, added to what `got` holds: a 206 goes on from where the bytes stopped, a
 * 200 (the whole file) starts over. It is read as the transport's `read`: a body that breaks off is `network`, and
 * the bytes taken before stay in `got` for the next attempt; one cut by the caller's signal or the client's close
 * rejects as that request would.
 */
async function readDownload(res: Response, uuid: string, options: { onProgress?: (p: Progress) => void }, got: Received): Promise<void> {
  if (res.status === 206) {
    const m = /^bytes (\d+)-\d+\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
    if (!m || Number(m[1]) !== got.loaded) {
      Object.assign(got, { parts: [], loaded: 0, total: 0, etag: null });
      throw new SyncClientError('network', `attachment ${uuid}: the server sent another range than the one asked for (${res.headers.get('content-range')}); starting over`);
    }
    got.total = Number(m[2]);
  } else {
    const etag = res.headers.get('etag');
    Object.assign(got, { parts: [], loaded: 0, total: Number(res.headers.get('content-length') ?? 0), etag: etag && !etag.startsWith('W/') ? etag : null });
  }
  options.onProgress?.({ loaded: got.loaded, total: got.total });
  const reader = res.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    got.parts.push(value);
    got.loaded += value.length;
    options.onProgress?.({ loaded: got.loaded, total: got.total });
  }
  if (got.total && got.loaded !== got.total) throw new SyncClientError('network', `attachment ${uuid}: received ${got.loaded} of ${got.total} bytes`);
}

function joined(got: Received): Uint8Array {
  const out = new Uint8Array(got.loaded);
  let at = 0;
  for (const c of got.parts) { out.set(c, at); at += c.length; }
  return out;
}

async function hexSha256(bytes: Uint8Array): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** The local store's key for an upload under way: the same file for the same record of the same business. */
function uploadKey(business: string, input: UploadInput, sha256: string): string {
  return `upload\u0000${business}\u0000${input.recordType}\u0000${input.recordUuid}\u0000${sha256}\u0000${input.bytes.length}\u0000${input.filename}`;
}

/** Refusals of an upload for good (too large, not a member, bytes not as announced): nothing is left to resume. */
function refusesUpload(e: SyncClientError): boolean {
  return e.code === 'payload_too_large' || e.code === 'forbidden' || e.code === 'invalid_request' || e.code === 'limit_exceeded';
}
