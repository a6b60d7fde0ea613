/**
 * Group commit for pushes: while a transaction for a queue is running, pushes
 * that arrive for the same queue wait, and the next transaction takes them all
 * (up to `maxBatch` pushes and, past the first, `maxItems` by `size`). Every push still commits atomically (the group commits
 * or rolls back as one), each caller is answered only after the commit that
 * holds its push, and the fsync and counter lock are paid once per group
 * instead of once per push. If a group fails, its pushes are run again one by
 * one, so one failing push fails alone.
 */
export interface PushGroupCommitter<I, O> {
  /** Queues `item` on `queue` (pushes of different queues run in parallel). */
  submit(queue: string, item: I): Promise<O>;
}

export function createPushGroupCommitter<I, O>(
  commit: (items: I[]) => Promise<O[]>,
  opts: { maxBatch: number; maxItems?: number; size?: (item: I) => number },
): PushGroupCommitter<I, O> {
  type Pending = { item: I; resolve: (o: O) => void; reject: (e: unknown) => void };
  const queues = new Map<string, Pending[]>();

  function takeCount(queue: readonly Pending[]): number {
    const { maxBatch, maxItems = Infinity, size = () => 1 } = opts;
    let n = 1;
    let items = size(queue[0]!.item);
    while (n < Math.min(maxBatch, queue.length) && (items += size(queue[n]!.item)) <= maxItems) n++;
    return n;
  }

  async function drain(key: string, queue: Pending[]): Promise<void> {
    while (queue.length) {
      // One macrotask turn first: pushes whose bodies already arrived get to join this group.
      await new Promise((resolve) => setImmediate(resolve));
      const batch = queue.splice(0, takeCount(queue));
      try {
        const out = await commit(batch.map((p) => p.item));
        batch.forEach((p, i) => p.resolve(out[i]!));
      } catch (e: unknown) {
        if (batch.length === 1) {
          batch[0]!.reject(e);
          continue;
        }
        for (const p of batch) {
          try {
            p.resolve((await commit([p.item]))[0]!);
          } catch (alone: unknown) {
            p.reject(alone);
          }
        }
      }
    }
    queues.delete(key);
  }

  return {
    submit(key, item) {
      return new Promise<O>((resolve, reject) => {
        let queue = queues.get(key);
        const start = !queue;
        if (!queue) queues.set(key, (queue = []));
        queue.push({ item, resolve, reject });
        if (start) void drain(key, queue);
      });
    },
  };
}
