import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import pg from 'pg';
import { createPgBlobStore, CHUNK_BYTES } from '../../src/sync/attachments/pg-blob-store.js';
import { BACKENDS, TEST_DATABASE_URL, freshStorage } from '../helpers/backends.js';

const skip = BACKENDS.includes('postgres') ? false : 'needs PostgreSQL';

async function open(t: { after(fn: () => Promise<void>): void }) {
  const storage = await freshStorage('postgres');
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${storage.pgSchema}"`);
  await admin.end();
  const pools = [1, 2].map(() => new pg.Pool({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${storage.pgSchema}`, max: 4 }));
  t.after(async () => { await Promise.all(pools.map((p) => p.end())); await storage.cleanup(); });
  // Two instances opening together: the table creation must not race.
  const [a, b] = await Promise.all(pools.map((p) => createPgBlobStore(p)));
  return { a: a!, b: b!, pool: pools[0]! };
}

/** A source that yields `data` in uneven pieces, as a network upload does. */
function source(data: Buffer, piece = 10_007): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < data.length; i += piece) parts.push(data.subarray(i, i + piece));
  return Readable.from(parts);
}

test('a blob stored through one instance reads back byte-exact through another, with size and sha256', { skip }, async (t) => {
  const { a, b } = await open(t);
  for (const size of [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES * 3 + 17]) {
    const data = randomBytes(size);
    const stored = await a.put(source(data));
    assert.equal(stored.size, size);
    assert.equal(stored.sha256, createHash('sha256').update(data).digest('hex'));
    const got = await b.get(stored.storedName);
    assert.ok(got);
    assert.equal(got.size, size);
    assert.ok((await buffer(got.stream)).equals(data), `size ${size}`);
  }
});

test('a source that fails mid-upload leaves nothing behind', { skip }, async (t) => {
  const { a, pool } = await open(t);
  async function* failing() {
    yield randomBytes(CHUNK_BYTES * 2);
    throw new Error('client aborted');
  }
  await assert.rejects(a.put(Readable.from(failing())), /client aborted/);
  const counts = await pool.query('SELECT (SELECT count(*) FROM attachment_blobs) AS blobs, (SELECT count(*) FROM attachment_blob_chunks) AS chunks');
  assert.deepEqual(counts.rows[0], { blobs: '0', chunks: '0' });
});

test('unknown, malformed and deleted names are absent; deleting twice is fine', { skip }, async (t) => {
  const { a, b, pool } = await open(t);
  const stored = await a.put(source(randomBytes(CHUNK_BYTES + 5)));
  assert.equal(await b.get('00000000-0000-4000-8000-000000000000'), undefined);
  assert.equal(await b.get("x' OR '1'='1"), undefined);
  assert.equal(await b.get('../../etc/passwd'), undefined);
  await b.delete(stored.storedName);
  await a.delete(stored.storedName);
  assert.equal(await a.get(stored.storedName), undefined);
  const chunks = await pool.query('SELECT count(*) AS n FROM attachment_blob_chunks');
  assert.equal(chunks.rows[0].n, '0');
});
