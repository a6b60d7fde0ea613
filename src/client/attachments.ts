// Why: attachment transfers fail halfway on real networks; this retries them with backoff, reports progress, and never stores an upload twice.
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { SyncClientError, isTransient } from './errors.js';
import type { Session } from './session.js';
import { json, type RequestBody } from './transport.js';
import type { Attachment } from './wire.js';
import { safeFilename } from '../sync/attachments/safe-filename.js';

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
  constructor(private readonly session: Session, private readonly business: () => string, private readonly o: AttachmentOptions = {}) {}

  async list(recordType: string, recordUuid: string): Promise<Attachment[]> {
    const q = `record_type=${encodeURIComponent(recordType)}&record_uuid=${encodeURIComponent(recordUuid)}`;
    return this.session.businessRequest(this.business(), 'GET', `/api/sync/attachments?${q}`, { read: json<Attachment[]> });
  }

  /**
   * Uploads a file for a record. A network failure retries the whole upload
   * after a backoff (the server has no partial uploads); before each retry the
   * record's attachments are listed, and one with the same name, size and
   * SHA-256 means the lost attempt was stored, so it is returned instead of
   * uploading a duplicate (the name as the server keeps it: `scans/q1.pdf` is
   * kept as `q1.pdf`). A listing that fails for the network is retried like the upload. 413 (`payload_too_large`) and 403 (`forbidden`) are thrown at once.
   */
  async upload(input: UploadInput): Promise<Attachment> {
    const sha256 = await hexSha256(input.bytes);
    const attempts = this.o.attempts ?? 5;
    // The name as the server keeps it (quoted as sent, then reduced by the server's own rule), to know the file again.
    const storedName = safeFilename(quoteName(input.filename));
    for (let attempt = 0; ; attempt++) {
      try {
        if (attempt > 0) {
          const stored = (await this.list(input.recordType, input.recordUuid))
            .find((a) => a.sha256 === sha256 && a.size === input.bytes.length && a.filename === storedName);
          if (stored) {
            input.onProgress?.({ loaded: input.bytes.length, total: input.bytes.length });
            return stored;
          }
        }
        return await this.uploadOnce(input);
      } catch (e: unknown) {
        await this.beforeRetry(e, attempt, attempts, input.signal);
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
   * After a failed attempt: rethrows what is not worth another (not transient, the last attempt, cancelled, or a
   * `retry_after` past maxRetryAfterSeconds), else waits the backoff or the server's `retry_after`, whichever is longer.
   */
  private async beforeRetry(e: unknown, attempt: number, attempts: number, signal: AbortSignal | undefined): Promise<void> {
    const told = e instanceof SyncClientError ? e.retryAfter ?? 0 : 0;
    if (!isTransient(e) || attempt + 1 >= attempts || signal?.aborted || told > (this.o.maxRetryAfterSeconds ?? 120)) throw e;
    await this.session.transportSleep(Math.max(told * 1000, backoffDelay(attempt, this.o.retry ?? { baseMs: 250, maxMs: 10_000 })));
  }

  private async uploadOnce(input: UploadInput): Promise<Attachment> {
    const boundary = `----fleetsync${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
    const enc = new TextEncoder();
    const field = (name: string, value: string) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const head = enc.encode(
      field('record_type', input.recordType) + field('record_uuid', input.recordUuid)
      + `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="${quoteName(input.filename)}"\r\ncontent-type: application/octet-stream\r\n\r\n`,
    );
    const tail = enc.encode(`\r\n--${boundary}--\r\n`);
    const total = input.bytes.length;
    const stream = this.o.streamUploads ?? !('document' in globalThis);
    input.onProgress?.({ loaded: 0, total });
    const headers = { 'content-type': `multipart/form-data; boundary=${boundary}` };
    let body: () => RequestBody;
    if (stream) {
      body = () => {
        let offset = 0;
        let stage = 0;
        return new ReadableStream<Uint8Array>({
          pull(controller) {
            if (stage === 0) { controller.enqueue(head); stage = 1; return; }
            if (offset < total) {
              const chunk = input.bytes.subarray(offset, Math.min(total, offset + CHUNK));
              offset += chunk.length;
              controller.enqueue(chunk);
              input.onProgress?.({ loaded: offset, total });
              return;
            }
            controller.enqueue(tail);
            controller.close();
          },
        });
      };
    } else {
      body = () => new Blob([head, input.bytes as Uint8Array<ArrayBuffer>, tail]);
    }
    const attachment = await this.session.businessRequest(this.business(), 'POST', '/api/sync/attachment', {
      body, headers, signal: input.signal, ...(stream ? { init: { duplex: 'half' } } : {}), read: json<Attachment>,
    });
    input.onProgress?.({ loaded: total, total });
    return attachment;
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

/** A multipart file name: quotes, backslashes and line breaks would end the header early. */
function quoteName(name: string): string {
  return name.replace(/["\\\r\n]/g, '_');
}
