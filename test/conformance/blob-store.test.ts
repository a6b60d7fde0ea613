import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import pg from 'pg';
import type { BlobEntry, BlobStore } from '../../src/sync/attachments/blob-store.js';
import { createLocalBlobStore } from '../../src/sync/attachments/local-blob-store.js';
import { CHUNK_BYTES, createPgBlobStore } from '../../src/sync/attachments/pg-blob-store.js';
import { BACKENDS, TEST_DATABASE_URL, freshStorage } from '../helpers/backends.js';

/**
 * The BlobStore contract (src/sync/attachments/blob-store.ts), run against
 * every implementation. `leftovers` lists what a store holds outside its
 * finished blobs (partial uploads), which must be nothing after a failed put.
 */
interface BlobStoreUnderTest {
  /** Two handles on one store, as two instances of the service see it. */
  a: BlobStore;
  b: BlobStore;
  leftovers(): Promise<number>;
  /** A pool of one connection, when the store uses a database (to show an upload does not hold it). */
  pool?: pg.Pool;
}

type Hooks = { after(fn: () => unknown): void };

const FACTORIES: Array<{ name: string; skip: string | false; open(t: Hooks): Promise<BlobStoreUnderTest> }> = [
  {
    name: 'local disk',
    skip: false,
    async open(t) {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'blobs-'));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const [a, b] = await Promise.all([createLocalBlobStore(dir), createLocalBlobStore(dir)]);
      return { a: a!, b: b!, leftovers: async () => readdirSync(path.join(dir, '.incoming')).length };
    },
  },
  {
    name: 'PostgreSQL',
    skip: BACKENDS.includes('postgres') ? false : 'needs PostgreSQL',
    async open(t) {
      const storage = await freshStorage('postgres');
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`CREATE SCHEMA "${storage.pgSchema}"`);
      await admin.end();
      // One connection per instance: an upload that held it would block every other query.
      const pools = [1, 2].map(() => new pg.Pool({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${storage.pgSchema}`, max: 1 }));
      t.after(async () => { await Promise.all(pools.map((p) => p.end())); await storage.cleanup(); });
      const staging = path.join(storage.dataDir, 'staging');
      // Two instances opening together: the table creation must not race.
      const [a, b] = await Promise.all(pools.map((p, i) => createPgBlobStore(p, `${staging}-${i}`)));
      const pool = pools[0]!;
      return {
        a: a!, b: b!, pool,
        async leftovers() {
          const r = await pool.query('SELECT (SELECT count(*) FROM attachment_blobs) + (SELECT count(*) FROM attachment_blob_chunks) AS n');
          return Number(r.rows[0].n) + readdirSync(`${staging}-0`).length;
        },
      };
    },
  },
];

/** A source that yields `data` in uneven pieces, as a network upload does. */
function source(data: Buffer, piece = 10_007): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < data.length; i += piece) parts.push(data.subarray(i, i + piece));
  return Readable.from(parts);
}

const ALL = { from: 0, to: Number.MAX_SAFE_INTEGER };

for (const f of FACTORIES) {
  describe(`BlobStore conformance: ${f.name}`, { skip: f.skip }, () => {
    test('a blob stored through one instance reads back byte-exact through another, with size and sha256', async (t) => {
      const { a, b } = await f.open(t);
      for (const size of [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES * 3 + 17]) {
        const data = randomBytes(size);
        const stored = await a.put(source(data));
        assert.equal(stored.size, size);
        assert.equal(stored.sha256, createHash('sha256').update(data).digest('hex'));
        const got = await b.get(stored.storedName);
        assert.ok(got);
        assert.equal(got.size, size);
        assert.ok((await buffer(got.read())).equals(data), `size ${size}`);
      }
    });

    test('a byte range reads exactly those bytes: from the start, inside a chunk, across chunk edges, to the end', async (t) => {
      const { a, b } = await f.open(t);
      const size = CHUNK_BYTES * 3 + 17;
      const data = randomBytes(size);
      const stored = await a.put(source(data));
      const got = await b.get(stored.storedName);
      assert.ok(got);
      const edges = [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + 5, size - 1];
      for (const start of edges) {
        for (const end of [start, start + 1, CHUNK_BYTES * 2 - 1, CHUNK_BYTES * 2, size - 1]) {
          if (end < start || end >= size) continue;
          const bytes = await buffer(got.read({ start, end }));
          assert.ok(bytes.equals(data.subarray(start, end + 1)), `bytes ${start}-${end}`);
        }
      }
    });

    test('a source that fails mid-upload rejects and leaves nothing behind', async (t) => {
      const { a, leftovers } = await f.open(t);
      async function* failing() {
        yield randomBytes(CHUNK_BYTES * 2);
        throw new Error('client aborted');
      }
      await assert.rejects(a.put(Readable.from(failing())), /client aborted/);
      assert.equal(await leftovers(), 0);
      assert.deepEqual(await a.listStored({ ...ALL, limit: 10 }), []);
    });

    test('unknown, malformed and deleted names are absent; deleting twice or deleting a malformed name is fine', async (t) => {
      const { a, b } = await f.open(t);
      const stored = await a.put(source(randomBytes(CHUNK_BYTES + 5)));
      assert.equal(await b.get('00000000-0000-4000-8000-000000000000'), undefined);
      assert.equal(await b.get("x' OR '1'='1"), undefined);
      assert.equal(await b.get('../../etc/passwd'), undefined);
      await b.delete('../../etc/passwd');
      await b.delete(stored.storedName);
      await a.delete(stored.storedName);
      assert.equal(await a.get(stored.storedName), undefined);
      assert.deepEqual(await a.listStored({ ...ALL, limit: 10 }), []);
    });

    test('listStored pages through a time range in (storedAt, storedName) order, each blob once', async (t) => {
      const { a, b } = await f.open(t);
      // File times come from a coarser clock than Date.now(): a margin keeps the first blob inside the range.
    const before = Date.now() - 1000;
      const names = new Set<string>();
      for (let i = 0; i < 7; i++) names.add((await a.put(source(randomBytes(10)))).storedName);
      const seen: BlobEntry[] = [];
      let after: BlobEntry | undefined;
      for (;;) {
        const page = await b.listStored({ from: before, to: Date.now() + 1000, limit: 3, ...(after ? { after } : {}) });
        assert.ok(page.length <= 3);
        seen.push(...page);
        if (page.length < 3) break;
        after = page[page.length - 1];
      }
      assert.deepEqual(new Set(seen.map((e) => e.storedName)), names);
      assert.equal(seen.length, names.size);
      for (let i = 1; i < seen.length; i++) {
        const [p, q] = [seen[i - 1]!, seen[i]!];
        assert.ok(p.storedAt < q.storedAt || (p.storedAt === q.storedAt && p.storedName < q.storedName), 'ordered');
      }
      assert.deepEqual(await b.listStored({ from: 0, to: before, limit: 10 }), [], 'nothing stored before the range');
      assert.deepEqual(await b.listStored({ from: Date.now() + 1000, to: Number.MAX_SAFE_INTEGER, limit: 10 }), [], 'nothing stored after it');
    });

    test('an upload whose client is slow holds no database connection while it streams', { skip: f.name === 'PostgreSQL' ? false : 'no connection pool' }, async (t) => {
      const { a, pool } = await f.open(t);
      let release!: () => void;
      const gate = new Promise<void>((r) => { release = r; });
      async function* slow() {
        yield randomBytes(CHUNK_BYTES + 1);
        await gate;
        yield randomBytes(10);
      }
      const put = a.put(Readable.from(slow()));
      // The pool has one connection: this query waits forever if the upload holds it.
      const r = await Promise.race([pool!.query('SELECT 1 AS one'), new Promise<'held'>((ok) => setTimeout(() => ok('held'), 5_000))]);
      assert.notEqual(r, 'held', 'the upload in progress holds the only connection');
      release();
      assert.equal((await put).size, CHUNK_BYTES + 11);
    });
  });
}
