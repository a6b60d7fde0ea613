import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { isStoredName, stageAndCommit, type BlobStore, type ByteRange, type StoredBlob } from './blob-store.js';
import { removeAbandoned, stageBlob } from './staging.js';
import { makeDir } from '../../core/make-dir.js';

/** Bytes per row: big enough that a 25 MiB file is ~100 rows, small enough that a download holds one chunk at a time. */
export const CHUNK_BYTES = 256 * 1024;
/** Any fixed number: serializes the table creation of instances starting together. */
const SCHEMA_LOCK = 7_461_001;

/**
 * Attachment bytes in PostgreSQL, so every instance of the sync service
 * reads what any other stored (the local-disk store is per machine). A blob is
 * a row in `attachment_blobs` and its bytes are 256 KiB `bytea` rows in
 * `attachment_blob_chunks`. An upload is first staged in a local file
 * (`stagingDir`), at the client's pace and without a database connection (the
 * pool is shared with push, pull and auth); only then is it copied in, in one
 * transaction: a failed or aborted upload leaves nothing; a committed one is
 * durable. Downloads read one chunk at a time, so memory stays bounded.
 *
 * This store is optional (used when the service runs on PostgreSQL), so it
 * owns its two tables and creates them at open, under an advisory lock.
 * Tables live in the service's schema (the pool's search_path).
 */
export async function createPgBlobStore(pool: pg.Pool, stagingDir: string): Promise<BlobStore> {
  await ensureTables(pool);
  makeDir(stagingDir, undefined, 'the attachments\' staging directory');
  await removeAbandoned(stagingDir);

  const store: BlobStore = {
    // The client sets the pace of the staging, so it holds no database connection; the commit copies local bytes.
    stage: (content: Readable) => stageBlob(stagingDir, content, (file, blob) => commitStaged(pool, file, blob)),

    put: (content) => stageAndCommit(store, content),

    async get(storedName) {
      if (!isStoredName(storedName)) return undefined;
      const { rows } = await pool.query<{ size: string | number }>('SELECT size FROM attachment_blobs WHERE stored_name = $1', [storedName]);
      if (!rows[0]) return undefined;
      return { size: Number(rows[0].size), read: (range) => readChunks(pool, storedName, range) };
    },

    async delete(storedName) {
      if (!isStoredName(storedName)) return;
      await pool.query('DELETE FROM attachment_blobs WHERE stored_name = $1', [storedName]);
    },

    async listStored({ from, to, after, limit }) {
      const { rows } = after
        ? await pool.query<{ stored_name: string; created_at: string | number }>(
          `SELECT stored_name, created_at FROM attachment_blobs WHERE created_at >= $1 AND created_at < $2
             AND (created_at, stored_name) > ($3, $4) ORDER BY created_at, stored_name LIMIT $5`,
          [from, to, after.storedAt, after.storedName, limit])
        : await pool.query<{ stored_name: string; created_at: string | number }>(
          'SELECT stored_name, created_at FROM attachment_blobs WHERE created_at >= $1 AND created_at < $2 ORDER BY created_at, stored_name LIMIT $3',
          [from, to, limit]);
      return rows.map((r) => ({ storedName: r.stored_name, storedAt: Number(r.created_at) }));
    },
  };
  return store;
}

/**
 * A blob's bytes, or those of `range`, one chunk per read. A range starting past the first chunk finds its chunk from
 * the chunks' lengths (`octet_length` reads no chunk's bytes), so resuming a download reads only what is left.
 */
function readChunks(pool: pg.Pool, storedName: string, range: ByteRange | undefined): Readable {
  let seq = 0;
  /** Bytes of the next chunk to leave out (the range starts inside it), and bytes still to send (range only). */
  let skip = 0;
  let left = range ? range.end - range.start + 1 : Number.POSITIVE_INFINITY;
  let located = !range || range.start === 0;
  const locate = async () => {
    const { rows } = await pool.query<{ seq: number; n: number }>(
      'SELECT seq, octet_length(data) AS n FROM attachment_blob_chunks WHERE stored_name = $1 ORDER BY seq', [storedName]);
    let offset = 0;
    for (const r of rows) {
      if (offset + r.n > range!.start) { seq = r.seq; skip = range!.start - offset; return; }
      offset += r.n;
    }
    seq = rows.length;
  };
  const next = async (): Promise<Buffer | null> => {
    if (!located) { await locate(); located = true; }
    if (left <= 0) return null;
    const r = await pool.query<{ data: Buffer }>('SELECT data FROM attachment_blob_chunks WHERE stored_name = $1 AND seq = $2', [storedName, seq++]);
    if (!r.rows[0]) return null;
    let data = r.rows[0].data.subarray(skip);
    skip = 0;
    if (data.length > left) data = data.subarray(0, left);
    left -= data.length;
    return data;
  };
  return new Readable({
    read() {
      next().then((data) => { this.push(data); }, (e: unknown) => { this.destroy(e instanceof Error ? e : new Error(String(e))); });
    },
  });
}

/**
 * Copies a staged upload into the tables in one transaction: the connection is
 * held only while local bytes go in, never while a client is still sending.
 */
async function commitStaged(pool: pg.Pool, staged: string, blob: StoredBlob): Promise<void> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    // Stored (for the orphan sweep) at commit: a blob is never older than its attachment row could be.
    await client.query('INSERT INTO attachment_blobs (stored_name, size, sha256, created_at) VALUES ($1, $2, $3, $4)', [blob.storedName, blob.size, blob.sha256, Date.now()]);
    let seq = 0;
    for await (const piece of createReadStream(staged, { highWaterMark: CHUNK_BYTES })) {
      await client.query('INSERT INTO attachment_blob_chunks (stored_name, seq, data) VALUES ($1, $2, $3)', [blob.storedName, seq++, piece]);
    }
    await client.query('COMMIT');
  } catch (e: unknown) {
    await client.query('ROLLBACK').catch(() => { broken = true; });
    throw e;
  } finally {
    client.release(broken);
  }
}

async function ensureTables(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
    await client.query(`CREATE TABLE IF NOT EXISTS attachment_blobs (
      stored_name TEXT PRIMARY KEY,
      size BIGINT NOT NULL,
      sha256 TEXT NOT NULL,
      created_at BIGINT NOT NULL
    )`);
    await client.query(`CREATE TABLE IF NOT EXISTS attachment_blob_chunks (
      stored_name TEXT NOT NULL REFERENCES attachment_blobs (stored_name) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      data BYTEA NOT NULL,
      PRIMARY KEY (stored_name, seq)
    )`);
    // The orphan sweep pages through blobs by store time.
    await client.query('CREATE INDEX IF NOT EXISTS attachment_blobs_created_idx ON attachment_blobs (created_at, stored_name)');
    await client.query('COMMIT');
  } catch (e: unknown) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}
