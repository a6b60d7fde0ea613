import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isAfter, isStoredName, type BlobEntry, type BlobStore } from './blob-store.js';

/** Uploads in progress. A file left there is an upload a crash interrupted. */
const INCOMING = '.incoming';
/**
 * Age past which a file in `.incoming` is an abandoned upload. Uploads are bounded by the
 * 30 s request timeout; a younger file may be another instance's upload into a shared directory.
 */
const ABANDONED_AFTER_MS = 10 * 60_000;

/**
 * Blobs as files `<dir>/<uuid>`. An upload streams into `<dir>/.incoming/`,
 * is fsynced, then renamed into place (and the directory fsynced), so a blob
 * is either complete and durable or absent. Names are validated as UUIDs on
 * every read, so no caller-supplied string ever reaches a path.
 */
export async function createLocalBlobStore(dir: string): Promise<BlobStore> {
  const incoming = path.join(dir, INCOMING);
  await mkdir(incoming, { recursive: true });
  const cutoff = Date.now() - ABANDONED_AFTER_MS;
  for (const leftover of await readdir(incoming)) {
    const file = path.join(incoming, leftover);
    const s = await stat(file).catch(() => undefined);
    if (s && s.mtimeMs < cutoff) await rm(file, { force: true });
  }

  return {
    async put(content: Readable) {
      const storedName = randomUUID();
      const tmp = path.join(incoming, storedName);
      const hash = createHash('sha256');
      let size = 0;
      const measure = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          size += chunk.length;
          hash.update(chunk);
          cb(null, chunk);
        },
      });
      try {
        await pipeline(content, measure, createWriteStream(tmp, { flags: 'wx' }));
        await fsyncPath(tmp, 'r+');
        await rename(tmp, path.join(dir, storedName));
        await fsyncPath(dir, 'r');
      } catch (e: unknown) {
        await rm(tmp, { force: true });
        throw e;
      }
      return { storedName, size, sha256: hash.digest('hex') };
    },

    async get(storedName) {
      if (!isStoredName(storedName)) return undefined;
      const file = path.join(dir, storedName);
      try {
        const s = await stat(file);
        return { stream: createReadStream(file), size: s.size };
      } catch (e: unknown) {
        if ((e as { code?: string }).code === 'ENOENT') return undefined;
        throw e;
      }
    },

    async delete(storedName) {
      if (!isStoredName(storedName)) return;
      await rm(path.join(dir, storedName), { force: true });
    },

    async listStored({ from, to, after, limit }) {
      // A directory has no index: it is listed whole, but only the page is kept.
      const page: BlobEntry[] = [];
      for (const name of await readdir(dir)) {
        if (!isStoredName(name)) continue;
        const s = await stat(path.join(dir, name)).catch(() => undefined);
        if (!s) continue;
        const entry = { storedName: name, storedAt: Math.floor(s.mtimeMs) };
        if (entry.storedAt < from || entry.storedAt >= to || !isAfter(entry, after)) continue;
        page.push(entry);
        if (page.length > limit * 2) trim(page, limit);
      }
      trim(page, limit);
      return page;
    },
  };
}

function trim(page: BlobEntry[], limit: number): void {
  page.sort((a, b) => a.storedAt - b.storedAt || (a.storedName < b.storedName ? -1 : a.storedName > b.storedName ? 1 : 0));
  page.length = Math.min(page.length, limit);
}

async function fsyncPath(p: string, flags: 'r' | 'r+'): Promise<void> {
  const fh = await open(p, flags);
  try { await fh.sync(); } finally { await fh.close(); }
}
