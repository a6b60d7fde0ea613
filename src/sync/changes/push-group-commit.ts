/**
 * Group commit for pushes: while a transaction for a queue is running, pushes
 * that arrive for the same queue wait, and the next transaction takes them all
 * (up to `maxBatch` pushes and, past the first, `maxItems` by `size`), after a
 * short linger for devices that are pushing but not yet queued. Every push
 * still commits atomically (the group commits or rolls back as one), each
 * caller is answered only after the commit that holds its push, and the fsync
 * and counter lock are paid once per group instead of once per push. If a
 * group fails, its pushes are run again one by one, so one failing push fails
 * alone.
 */
export interface PushGroupCommitter<I, O> {
  /** Queues `item` on `queue` (pushes of different queues run in parallel). */
  submit(queue: string, item: I): Promise<O>;
}

/** A submitter that pushed this recently is expected to push again soon. */
const ACTIVE_MS = 50;

export function createPushGroupCommitter<I, O>(
  commit: (items: I[]) => Promise<O[]>,
  opts: {
    maxBatch: number;
    maxItems?: number;
    size?: (item: I) => number;
    /** Who submitted an item (a device), for the linger below. */
    submitter?: (item: I) => string;
    /**
     * Before a group starts, wait up to this long for submitters that pushed in the last ACTIVE_MS but have nothing
     * queued: typically the devices just answered by the previous commit, whose next pushes are on their way. One
     * commit for all of them instead of two halves each paying a commit. No wait when nobody else is active.
     */
    lingerMs?: number;
  },
): PushGroupCommitter<I, O> {
  type Pending = { item: I; resolve: (o: O) => void; reject: (e: unknown) => void };
  const queues = new Map<string, Pending[]>();
  /** Per queue: when each submitter last submitted. */
  const lastSeen = new Map<string, Map<string, number>>();
  const arrivals = new Map<string, () => void>();

  /** Waits while an active submitter is missing from the queue, until `lingerMs` passed or the group is full. */
  async function linger(key: string, queue: Pending[]): Promise<void> {
    const { submitter, lingerMs = 0, maxBatch } = opts;
    const seen = lastSeen.get(key);
    if (!submitter || !lingerMs || !seen) return;
    const deadline = performance.now() + lingerMs;
    for (;;) {
      const now = performance.now();
      if (now >= deadline || queue.length >= maxBatch) return;
      const queued = new Set(queue.map((p) => submitter(p.item)));
      let missing = false;
      for (const [who, at] of seen) {
        if (now - at > ACTIVE_MS) seen.delete(who);
        else if (!queued.has(who)) missing = true;
      }
      if (!missing) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - now);
        arrivals.set(key, () => { clearTimeout(timer); resolve(); });
      });
      arrivals.delete(key);
    }
  }

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
      await linger(key, queue);
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
    // A queue that stays empty forgets its submitters once they are no longer active, so quiet businesses cost nothing.
    setTimeout(() => { if (!queues.has(key)) lastSeen.delete(key); }, ACTIVE_MS).unref();
  }

  return {
    submit(key, item) {
      return new Promise<O>((resolve, reject) => {
        let queue = queues.get(key);
        const start = !queue;
        if (!queue) queues.set(key, (queue = []));
        queue.push({ item, resolve, reject });
        if (opts.submitter) {
          let seen = lastSeen.get(key);
          if (!seen) lastSeen.set(key, (seen = new Map()));
          seen.set(opts.submitter(item), performance.now());
        }
        arrivals.get(key)?.();
        if (start) void drain(key, queue);
      });
    },
  };
}
