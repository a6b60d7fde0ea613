/**
 * Group commit: callers submit items one at a time; while one transaction is
 * committing, newcomers queue, and the next transaction takes them all (up to
 * `maxBatch`). Each caller's promise settles after the commit that holds its
 * item, so an fsync per commit is shared by every request that arrived
 * meanwhile instead of paid by each one.
 */
export interface GroupCommitter<I, O> {
  submit(item: I): Promise<O>;
  /** Resolves once everything submitted so far is committed; later submits reject. */
  close(): Promise<void>;
}

export function createGroupCommitter<I, O>(
  commit: (items: I[]) => Promise<O[]>,
  opts: { maxBatch: number; onClosedSubmit: () => Error },
): GroupCommitter<I, O> {
  type Pending = { item: I; resolve: (o: O) => void; reject: (e: unknown) => void };
  let queue: Pending[] = [];
  let running: Promise<void> | undefined;
  let closed = false;

  async function drain(): Promise<void> {
    while (queue.length) {
      // One macrotask turn first: requests whose bytes already arrived get to submit and join this batch.
      await new Promise((resolve) => setImmediate(resolve));
      const batch = queue.slice(0, opts.maxBatch);
      queue = queue.slice(batch.length);
      try {
        const out = await commit(batch.map((p) => p.item));
        batch.forEach((p, i) => p.resolve(out[i]!));
      } catch (e: unknown) {
        for (const p of batch) p.reject(e);
      }
    }
    running = undefined;
  }

  return {
    submit(item) {
      if (closed) return Promise.reject(opts.onClosedSubmit());
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        running ??= drain();
      });
    },
    async close() {
      closed = true;
      await running;
    },
  };
}
