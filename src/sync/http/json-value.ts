// Why: what JSON the service refuses to keep, in one dependency-free module the server's body parser and the client's local writes share.

/**
 * Deepest nesting of arrays and objects a JSON body may have. Records are
 * shallow in practice; the bound keeps every later walk of the data (key
 * sorting, storage, serialisation) far from the stack limit, which 3000
 * levels (6 KB of text) used to reach.
 */
export const MAX_JSON_DEPTH = 64;

/** Under the `u` flag \p{Cs} matches only unpaired surrogates: a proper pair is one code point. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Why a parsed JSON value cannot be accepted, or undefined. Iterative, so no input can exhaust the stack. */
export function jsonValueProblem(value: unknown, maxDepth: number = MAX_JSON_DEPTH): string | undefined {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return 'body: a number is out of range (JSON numbers must be finite doubles, e.g. not 1e999)';
      continue;
    }
    // A lone UTF-16 surrogate has no UTF-8 form: PostgreSQL would store U+FFFD instead, a silent change.
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return 'body: a string holds a lone UTF-16 surrogate (not well-formed Unicode)';
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) return `body: arrays and objects may nest at most ${maxDepth} levels deep`;
    if (!Array.isArray(v) && Object.keys(v).some((k) => LONE_SURROGATE.test(k))) return 'body: a key holds a lone UTF-16 surrogate (not well-formed Unicode)';
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return undefined;
}
