import { createReadStream } from 'node:fs';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { isAfter, isStoredName, stageAndCommit, type BlobEntry, type BlobStore } from './blob-store.js';
import { removeAbandoned, stageBlob } from './staging.js';
import { makeDir } from '../../core/make-dir.js';

/** Uploads in progress. A file left there is an upload a crash interrupted. */
const INCOMING = '.incoming';
/**
 * Blobs as files `<dir>/<uuid>`. An upload streams into `<dir>/.incoming/`,
 * is fsynced, then renamed into place (and the directory fsynced), so a blob
 * is either complete and durable or absent. Names are validated as UUIDs on
 * every read, so no caller-supplied string ever reaches a path.
 */
export async function createLocalBlobStore(dir: string): Promise<BlobStore> {
  const incoming = path.join(dir, INCOMING);
  makeDir(incoming, 0o700, 'the attachment directory');
  await removeAbandoned(incoming);

  const store: BlobStore = {
    stage: (content: Readable) => stageBlob(incoming, content, async (file, blob) => {
      await rename(file, path.join(dir, blob.storedName));
      await fsyncPath(dir, 'r');
    }, (file) => fsyncPath(file, 'r+')),

    put: (content) => stageAndCommit(store, content),

    async get(storedName) {
      if (!isStoredName(storedName)) return undefined;
      const file = path.join(dir, storedName);
      try {
        const s = await stat(file);
        return { size: s.size, read: (range) => createReadStream(file, range ? { start: range.start, end: range.end } : {}) };
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
  return store;
}

function trim(page: BlobEntry[], limit: number): void {
  page.sort((a, b) => a.storedAt - b.storedAt || (a.storedName < b.storedName ? -1 : a.storedName > b.storedName ? 1 : 0));
  page.length = Math.min(page.length, limit);
}

async function fsyncPath(p: string, flags: 'r' | 'r+'): Promise<void> {
  const fh = await open(p, flags);
  try { await fh.sync(); } finally { await fh.close(); }
}
