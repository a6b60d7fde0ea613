import type { AttachmentStore } from './attachment-store.js';
import type { BlobEntry, BlobStore } from './blob-store.js';

/**
 * Age past which a blob without an attachment row is an orphan. An upload
 * stores its blob only once its whole form has arrived (multipart-upload.ts),
 * then its row at once; a younger blob may be an upload finishing on this or
 * another instance.
 */
export const ORPHAN_AFTER_MS = 10 * 60_000;

/** Blobs checked per round trip: bounds the memory and the size of each query. */
export const SWEEP_PAGE = 500;

/**
 * Removes blobs that a crash left between storing the bytes and inserting
 * their attachment row. Runs at start; returns how many were removed.
 *
 * Only blobs stored since the previous sweep are read (from its mark, less
 * ORPHAN_AFTER_MS of overlap for clocks that disagree), a page at a time, so
 * a restart costs what was uploaded since, not the whole store. Two instances
 * sweeping together do the same deletes, which are idempotent.
 */
export async function removeOrphanBlobs(blobs: BlobStore, attachments: AttachmentStore, now: number): Promise<number> {
  const to = now - ORPHAN_AFTER_MS;
  const from = Math.max(0, (await attachments.sweptUntil()) - ORPHAN_AFTER_MS);
  if (from >= to) return 0;
  let removed = 0;
  let after: BlobEntry | undefined;
  for (;;) {
    const page = await blobs.listStored({ from, to, after, limit: SWEEP_PAGE });
    if (!page.length) break;
    const referenced = await attachments.referenced(page.map((e) => e.storedName));
    for (const e of page) {
      if (referenced.has(e.storedName)) continue;
      await blobs.delete(e.storedName);
      removed++;
    }
    if (page.length < SWEEP_PAGE) break;
    after = page[page.length - 1];
  }
  await attachments.markSwept(to);
  return removed;
}
