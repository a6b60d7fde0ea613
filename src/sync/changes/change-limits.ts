/**
 * Documented bounds of the change endpoints (docs/sync-api.md). They keep one
 * push inside one short transaction and one pull page inside one response.
 */
export const PUSH_LIMITS = {
  /** Most items in `changes`, and separately in `tombstones`, of one push; more is a 400. */
  maxItems: 1000,
  /** Largest `data` of one change, measured as its JSON text in UTF-8 bytes; larger items are rejected. */
  maxDataBytes: 64 * 1024,
  /** `table_name`: a letter or underscore, then letters, digits, underscores; at most 63 characters. */
  tableNamePattern: /^[A-Za-z_][A-Za-z0-9_]{0,62}$/,
  /** `instance_id`: what device ids look like in practice (uuids, hostnames, `ios:1234`). */
  instanceIdPattern: /^[A-Za-z0-9._:-]{1,128}$/,
  maxBranchLength: 128,
  /** Versions stay exact in JSON numbers and BIGINT columns. */
  maxVersion: Number.MAX_SAFE_INTEGER,
} as const;

/** Conflict list page: `limit` defaults to `default`; a larger one is reduced to `max`. (Pull pages are configured: --pull-page-size, --pull-page-max.) */
export const CONFLICT_PAGE = { default: 100, max: 1000 } as const;

export const DEFAULT_BRANCH = 'main';
