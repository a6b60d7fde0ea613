import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { isStoredName, type BlobStore } from './blob-store.js';

/** Bytes per row: big enough that a 25 MiB file is ~100 rows, small enough that a download holds one chunk at a time. */
export const CHUNK_BYTES = 256 * 1024;
/** Any fixed number: serializes the table creation of instances starting together. */
const SCHEMA_LOCK = 7_461_001;

/**
 * Attachment bytes in PostgreSQL, so every instance of the sync service
 * reads what any other stored (the local-disk store is per machine). A blob is
 * a row in `attachment_blobs` and its bytes are 256 KiB `bytea` rows in
 * `attachment_blob_chunks`, written in one transaction: a failed or aborted
 * upload rolls back and leaves nothing; a committed one is durable. Downloads
 * read one chunk at a time, so memory stays bounded whatever the size.
 *
 * This store is optional (used when the service runs on PostgreSQL), so it
 * owns its two tables and creates them at open, under an advisory lock.
 * Tables live in the service's schema (the pool's search_path).
 */
export async function createPgBlobStore(pool: pg.Pool): Promise<BlobStore> {
  await ensureTables(pool);

  return {
    async put(content: Readable) {
      const storedName = randomUUID();
      const hash = createHash('sha256');
      let size = 0;
      let seq = 0;
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        await client.query('INSERT INTO attachment_blobs (stored_name, size, sha256, created_at) VALUES ($1, 0, $2, $3)', [storedName, '', Date.now()]);
        const writeChunk = (piece: Buffer) =>
          client.query('INSERT INTO attachment_blob_chunks (stored_name, seq, data) VALUES ($1, $2, $3)', [storedName, seq++, piece]);
        let pending: Buffer[] = [];
        let pendingBytes = 0;
        for await (const chunk of content) {
          const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
          size += buf.length;
          hash.update(buf);
          pending.push(buf);
          pendingBytes += buf.length;
          if (pendingBytes < CHUNK_BYTES) continue;
          let all = Buffer.concat(pending);
          while (all.length >= CHUNK_BYTES) {
            await writeChunk(all.subarray(0, CHUNK_BYTES));
            all = all.subarray(CHUNK_BYTES);
          }
          pending = [all];
          pendingBytes = all.length;
        }
        if (pendingBytes) await writeChunk(Buffer.concat(pending));
        const sha256 = hash.digest('hex');
        await client.query('UPDATE attachment_blobs SET size = $2, sha256 = $3 WHERE stored_name = $1', [storedName, size, sha256]);
        await client.query('COMMIT');
        return { storedName, size, sha256 };
      } catch (e: unknown) {
        await client.query('ROLLBACK').catch(() => { broken = true; });
        throw e;
      } finally {
        client.release(broken);
      }
    },

    async get(storedName) {
      if (!isStoredName(storedName)) return undefined;
      const { rows } = await pool.query<{ size: string | number }>('SELECT size FROM attachment_blobs WHERE stored_name = $1', [storedName]);
      if (!rows[0]) return undefined;
      let seq = 0;
      const stream = new Readable({
        async read() {
          try {
            const r = await pool.query<{ data: Buffer }>('SELECT data FROM attachment_blob_chunks WHERE stored_name = $1 AND seq = $2', [storedName, seq++]);
            this.push(r.rows[0] ? r.rows[0].data : null);
          } catch (e: unknown) {
            this.destroy(e instanceof Error ? e : new Error(String(e)));
          }
        },
      });
      return { stream, size: Number(rows[0].size) };
    },

    async delete(storedName) {
      if (!isStoredName(storedName)) return;
      await pool.query('DELETE FROM attachment_blobs WHERE stored_name = $1', [storedName]);
    },

    async storedBefore(cutoffMs) {
      const { rows } = await pool.query<{ stored_name: string }>('SELECT stored_name FROM attachment_blobs WHERE created_at < $1', [cutoffMs]);
      return rows.map((r) => r.stored_name);
    },
  };
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
    await client.query('COMMIT');
  } catch (e: unknown) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}
