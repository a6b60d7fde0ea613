import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { AppError } from '../../core/errors.js';
import type { Static } from 'typebox';
import type { UploadSessionSchema } from './attachment-schemas.js';
import type { AttachmentRow, AttachmentStore } from './attachment-store.js';
import { toAttachment } from './attachments.js';
import type { BlobStore } from './blob-store.js';
import { safeFilename } from './safe-filename.js';
import type { UploadPartRow, UploadRow, UploadStore } from './upload-store.js';

/** A session lives a day past its last byte (or its completion, so a lost final answer can still be asked for). */
export const UPLOAD_TTL_MS = 24 * 3_600_000;
/** Unfinished sessions per user: each may hold up to the attachment size limit on disk until it expires. */
export const MAX_OPEN_UPLOADS = 20;
/** Sessions removed per sweep batch, and batches per sweep. */
const SWEEP_BATCH = 100;
const SWEEP_BATCHES = 20;

export interface UploadDeps {
  uploads: UploadStore;
  attachments: AttachmentStore;
  blobs: BlobStore;
  /** Epoch milliseconds. */
  now: () => number;
  maxBytes: number;
}

/** An upload as the API shows it. */
export type UploadSession = Static<typeof UploadSessionSchema>;

export interface NewUpload {
  businessId: string;
  userId: string;
  recordType: string;
  recordUuid: string;
  filename: string;
  size: number;
  sha256?: string;
}

/**
 * Opens a session for a file of `size` bytes; nothing is stored until its bytes come. `limit_exceeded` when the user
 * has MAX_OPEN_UPLOADS unfinished sessions, also counting those of concurrent starts.
 */
export async function startUpload(deps: UploadDeps, input: NewUpload): Promise<UploadSession> {
  if (input.size > deps.maxBytes) throw new AppError('payload_too_large', `an attachment may be at most ${deps.maxBytes} bytes`);
  const now = deps.now();
  const row: UploadRow = {
    id: randomUUID(),
    business_id: input.businessId,
    user_id: input.userId,
    record_type: input.recordType,
    record_uuid: input.recordUuid.toLowerCase(),
    filename: safeFilename(input.filename),
    size: input.size,
    sha256: input.sha256?.toLowerCase() ?? null,
    received: 0,
    created_at: now,
    expires_at: now + UPLOAD_TTL_MS,
    attachment_uuid: null,
  };
  if (!(await deps.uploads.createIfUnder(row, MAX_OPEN_UPLOADS, now))) {
    throw new AppError('limit_exceeded', `at most ${MAX_OPEN_UPLOADS} unfinished uploads per user: finish or cancel one (DELETE), or wait until one expires`);
  }
  return toSession(row, null);
}

/**
 * The session `id` when `mayUse(row)` lets the caller at it and it has not expired; anything else is `not_found`,
 * so another user's upload looks exactly like a missing one.
 */
export async function findUpload(deps: UploadDeps, id: string, mayUse: (row: UploadRow) => Promise<boolean>): Promise<UploadRow> {
  const row = await deps.uploads.find(id.toLowerCase());
  if (!row || row.expires_at <= deps.now() || !(await mayUse(row))) throw gone();
  return row;
}

export async function showUpload(deps: UploadDeps, row: UploadRow): Promise<UploadSession> {
  return toSession(row, row.attachment_uuid ? await deps.attachments.find(row.attachment_uuid) : undefined);
}

/**
 * Adds the bytes `body` brings at `offset`, which must be where the session's bytes end (else `conflict`, with the
 * session's length as `received`). Whatever part of the body arrives is kept, also when the client goes away
 * before its end (the caller ends `body` then, rather than failing it), so a retry goes on from there. Once every
 * byte is in, the pieces become the attachment. `body` must fail with `payload_too_large` past `size - offset` bytes.
 */
export async function appendToUpload(deps: UploadDeps, row: UploadRow, offset: number, body: Readable): Promise<UploadSession> {
  if (offset !== row.received || row.attachment_uuid) {
    body.resume();
    throw behind(row);
  }
  let current = row;
  const staged = await deps.blobs.stage(body);
  if (staged.size === 0) {
    await staged.discard();
  } else {
    await staged.commit();
    const part: UploadPartRow = { upload_id: row.id, start: offset, size: staged.size, stored_name: staged.storedName, sha256: staged.sha256 };
    const moved = await deps.uploads.addPart(part, deps.now() + UPLOAD_TTL_MS);
    if (!moved) {
      // Another request for this session got there first, or it was cancelled or expired meanwhile.
      await deps.blobs.delete(staged.storedName);
      const now = await deps.uploads.find(row.id);
      throw now ? behind(now) : gone();
    }
    current = moved;
  }
  if (current.received === current.size && !current.attachment_uuid) return completeUpload(deps, current);
  return showUpload(deps, current);
}

function gone(): AppError {
  return new AppError('not_found', 'no such upload (an upload expires a day after its last byte)');
}

function behind(row: UploadRow): AppError {
  if (row.attachment_uuid) return new AppError('conflict', `the upload is complete (${row.size} bytes)`, { received: row.received });
  return new AppError('conflict', `the upload holds ${row.received} bytes: send from byte ${row.received}`, { received: row.received });
}

/**
 * Makes the pieces one blob (a single piece holding the whole file is the blob already, its SHA-256 measured as
 * it arrived; several are streamed into a new one), checks the announced SHA-256 and records the attachment with the
 * session's completion in one transaction, which also forgets a piece adopted whole. Two requests completing together both get there; one
 * records, the other drops the blob it made (never an adopted piece, the winner's attachment now) and answers what
 * the first recorded. Joined pieces go afterwards; a crash before leaves them to the sweep.
 */
async function completeUpload(deps: UploadDeps, row: UploadRow): Promise<UploadSession> {
  const parts = await deps.uploads.parts(row.id);
  const whole = parts.length === 1 && parts[0]!.start === 0 && parts[0]!.size === row.size ? parts[0]! : undefined;
  let blob;
  try {
    blob = whole
      ? { storedName: whole.stored_name, size: whole.size, sha256: whole.sha256 }
      : await deps.blobs.put(Readable.from(joined(deps.blobs, parts)));
  } catch (e: unknown) {
    // A piece went while being joined: the upload was cancelled, or another request completed it and deleted them.
    return settledMeanwhile(deps, row.id, e);
  }
  if (blob.size !== row.size) {
    // A piece cut short under the join (PostgreSQL's reader ends where a deleted blob's chunks do): not the client's bytes.
    await deps.blobs.delete(blob.storedName);
    return settledMeanwhile(deps, row.id, new Error(`upload ${row.id}: its pieces joined to ${blob.size} of ${row.size} bytes`));
  }
  if (row.sha256 !== null && blob.sha256 !== row.sha256) {
    await deps.blobs.delete(blob.storedName);
    await removeUpload(deps, row.id);
    throw new AppError('invalid_request', `the ${blob.size} bytes received have SHA-256 ${blob.sha256}, not ${row.sha256} as announced; `
      + 'the upload is removed: start a new one');
  }
  const now = deps.now();
  const attachment: AttachmentRow = {
    uuid: randomUUID(), business_id: row.business_id, record_type: row.record_type, record_uuid: row.record_uuid,
    filename: row.filename, stored_name: blob.storedName, size: blob.size, sha256: blob.sha256, uploaded_by: row.user_id, created_at: now,
  };
  if (!(await deps.uploads.complete(row.id, attachment, now + UPLOAD_TTL_MS))) {
    if (!whole) await deps.blobs.delete(blob.storedName);
    const done = await deps.uploads.find(row.id);
    if (!done) throw gone();
    return showUpload(deps, done);
  }
  if (!whole) await removeParts(deps, parts);
  return toSession({ ...row, attachment_uuid: attachment.uuid, expires_at: now + UPLOAD_TTL_MS }, attachment);
}

/** What a completion that failed under its join answers: 404 if cancelled, the attachment if another request made it. */
async function settledMeanwhile(deps: UploadDeps, id: string, failure: unknown): Promise<UploadSession> {
  const now = await deps.uploads.find(id);
  if (!now) throw gone();
  if (now.attachment_uuid) return showUpload(deps, now);
  throw failure;
}

async function* joined(blobs: BlobStore, parts: UploadPartRow[]): AsyncGenerator<Buffer> {
  for (const p of parts) {
    const reader = await blobs.get(p.stored_name);
    if (!reader) throw new Error(`upload ${p.upload_id}: its piece at byte ${p.start} (blob ${p.stored_name}) is not in the attachment store`);
    yield* reader.read() as AsyncIterable<Buffer>;
  }
}

/**
 * Forgets a session, then deletes its pieces (a crash between leaves them to the sweep). The attachment it became
 * stays. The pieces are listed only once the session is gone: no completion can adopt one after that, and one that
 * did before took it off the list, so a cancel racing the last PATCH never deletes an attachment's bytes.
 */
export async function removeUpload(deps: UploadDeps, id: string): Promise<void> {
  await deps.uploads.remove(id);
  await removeParts(deps, await deps.uploads.parts(id));
}

async function removeParts(deps: Pick<UploadDeps, 'uploads' | 'blobs'>, parts: UploadPartRow[]): Promise<void> {
  for (const p of parts) {
    await deps.blobs.delete(p.stored_name);
    await deps.uploads.removePart(p.stored_name);
  }
}

/**
 * Removes expired sessions and every piece whose session is gone (expired, cancelled, or completed and its pieces
 * not yet deleted when a crash came). A session is removed only while still expired, so a request that has just
 * moved it on keeps it. Returns how many sessions went. Two instances sweeping together do idempotent deletes.
 */
export async function sweepUploads(deps: Pick<UploadDeps, 'uploads' | 'blobs'>, now: number): Promise<number> {
  let removed = 0;
  for (let i = 0; i < SWEEP_BATCHES; i++) {
    const ids = await deps.uploads.expired(now, SWEEP_BATCH);
    for (const id of ids) if (await deps.uploads.removeIfExpired(id, now)) removed++;
    if (ids.length < SWEEP_BATCH) break;
  }
  for (let i = 0; i < SWEEP_BATCHES; i++) {
    const stray = await deps.uploads.strayParts(SWEEP_BATCH);
    await removeParts(deps, stray);
    if (stray.length < SWEEP_BATCH) break;
  }
  return removed;
}

function toSession(row: UploadRow, attachment: AttachmentRow | null | undefined): UploadSession {
  return {
    id: row.id, record_type: row.record_type, record_uuid: row.record_uuid, filename: row.filename, size: row.size,
    sha256: row.sha256, received: row.received, expires_at: new Date(row.expires_at).toISOString(),
    attachment: attachment ? toAttachment(attachment) : null,
  };
}
