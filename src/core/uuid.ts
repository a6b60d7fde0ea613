/** Any RFC 4122 UUID in its textual form, either case. Ids are stored lower-case. */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const UUID_RE = new RegExp(UUID_PATTERN);

/** The lower-case UUID, or undefined when `raw` is not one. */
export function normalizeUuid(raw: string): string | undefined {
  return UUID_RE.test(raw) ? raw.toLowerCase() : undefined;
}

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value);
}
