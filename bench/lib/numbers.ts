// Why: every benchmark drives load a few requests at a time and prints counts and percentiles the same way.

/** Runs `fn` over `items` with at most `concurrency` calls in flight. */
export async function pool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

/** The `q` quantile of values already sorted ascending (0 when there are none). */
export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/** A count rounded and grouped for a table: 12,345. */
export function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
