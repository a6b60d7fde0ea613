// Why: both blob stores take an upload the same way (streamed into a local file while its size and hash are measured)
// and sweep the files an interrupted upload left behind; one place for both.
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { StagedBlob, StoredBlob } from './blob-store.js';

/**
 * Age past which a staged file is an upload a crash interrupted. Uploads are
 * bounded by the 30 s request timeout; a younger file may be another
 * instance's upload into a shared directory.
 */
const ABANDONED_AFTER_MS = 10 * 60_000;

/** Streams `content` into the new file `file` (refused if it exists); resolves to its size and hex SHA-256. */
export async function stageUpload(content: Readable, file: string): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  const measure = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  await pipeline(content, measure, createWriteStream(file, { flags: 'wx' }));
  return { size, sha256: hash.digest('hex') };
}

/**
 * Stages `content` as a new file of `dir` (made durable by `settle` when given) under a new stored name; its `commit`
 * stores the file with `store`, and the staged file is gone afterwards either way.
 */
export async function stageBlob(
  dir: string, content: Readable, store: (file: string, blob: StoredBlob) => Promise<void>, settle?: (file: string) => Promise<void>,
): Promise<StagedBlob> {
  const storedName = randomUUID();
  const file = path.join(dir, storedName);
  const discard = () => rm(file, { force: true });
  try {
    const blob = { storedName, ...await stageUpload(content, file) };
    await settle?.(file);
    return {
      ...blob, discard,
      async commit() {
        try {
          await store(file, blob);
        } finally {
          await discard();
        }
      },
    };
  } catch (e: unknown) {
    await discard();
    throw e;
  }
}

/** Deletes the files of `dir` older than an upload can take. */
export async function removeAbandoned(dir: string): Promise<void> {
  const cutoff = Date.now() - ABANDONED_AFTER_MS;
  for (const leftover of await readdir(dir)) {
    const file = path.join(dir, leftover);
    const s = await stat(file).catch(() => undefined);
    if (s && s.mtimeMs < cutoff) await rm(file, { force: true });
  }
}
