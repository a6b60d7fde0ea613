import type { AttachmentStore } from './attachment-store.js';
import type { BlobStore } from './blob-store.js';

/**
 * Age past which a blob without an attachment row is an orphan. An upload
 * stores its blob, then its row, within the 30 s request timeout; a younger
 * blob may be an upload in progress on this or another instance.
 */
export const ORPHAN_AFTER_MS = 10 * 60_000;

/**
 * Removes blobs that a crash left between storing the bytes and inserting
 * their attachment row. Runs at start; returns how many were removed.
 */
export async function removeOrphanBlobs(blobs: BlobStore, attachments: AttachmentStore, now: number): Promise<number> {
  const candidates = await blobs.storedBefore(now - ORPHAN_AFTER_MS);
  if (!candidates.length) return 0;
  const referenced = await attachments.referenced(candidates);
  const orphans = candidates.filter((name) => !referenced.has(name));
  for (const name of orphans) await blobs.delete(name);
  return orphans.length;
}
