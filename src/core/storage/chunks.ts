/** Values per IN (...) list or multi-row insert; far below SQLite's and PostgreSQL's bind-parameter limits. */
export const IN_LIST_MAX = 500;

/** Splits `items` into consecutive slices of at most `size`. */
export function chunks<T>(items: readonly T[], size = IN_LIST_MAX): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
