import { ConfigError, helpText, httpOptions, loadConfig, opsOptions, opt, type ConfigOf } from '../core/config.js';

/**
 * Every option of the sync service. Defaults are the documented production
 * values (docs/sync-api.md, "Limits" and "Tokens"); tests override them
 * through `loadSyncConfig({ argv })` or the `startSync` helper.
 */
export const syncOptions = {
  ...httpOptions('SYNC', 8081),
  ...opsOptions('SYNC'),
  accessTokenTtlSeconds: opt.int({
    flag: 'access-token-ttl', env: 'SYNC_ACCESS_TOKEN_TTL', default: 900, min: 10, max: 86_400,
    doc: 'Lifetime of user and business access tokens, in seconds. Short, because a leaked bearer token is usable until it expires.',
  }),
  refreshTokenTtlSeconds: opt.int({
    flag: 'refresh-token-ttl', env: 'SYNC_REFRESH_TOKEN_TTL', default: 30 * 86_400, min: 60, max: 365 * 86_400,
    doc: 'Lifetime of a refresh token, in seconds; every refresh issues a new one with a fresh lifetime (up to --session-max-age).',
  }),
  sessionMaxAgeSeconds: opt.int({
    flag: 'session-max-age', env: 'SYNC_SESSION_MAX_AGE', default: 90 * 86_400, min: 60, max: 3650 * 86_400,
    doc: 'Absolute lifetime of a session (refresh family), in seconds from the login: refreshing never extends it past this; then the user signs in again.',
  }),
  userRateLimit: opt.int({
    flag: 'user-rate-limit', env: 'SYNC_USER_RATE_LIMIT', default: 100, min: 1,
    doc: 'Requests per minute allowed to one authenticated user (all their tokens together).',
  }),
  ipRateLimit: opt.int({
    flag: 'ip-rate-limit', env: 'SYNC_IP_RATE_LIMIT', default: 20, min: 1,
    doc: 'Unauthenticated requests (register, login, refresh, missing or bad token) per minute allowed to one client IP.',
  }),
  lockoutThreshold: opt.int({
    flag: 'lockout-threshold', env: 'SYNC_LOCKOUT_THRESHOLD', default: 5, min: 1,
    doc: 'Failed logins for one e-mail address (within the lockout period) that lock it.',
  }),
  lockoutSeconds: opt.int({
    flag: 'lockout-seconds', env: 'SYNC_LOCKOUT_SECONDS', default: 900, min: 1,
    doc: 'How long a locked e-mail address stays locked, counted from the failure that locked it.',
  }),
  scryptLog2N: opt.int({
    flag: 'scrypt-log2n', env: 'SYNC_SCRYPT_LOG2N', default: 15, min: 10, max: 20,
    doc: 'scrypt cost for new password hashes: N = 2^value (r = 8, p = 3). 15 uses 32 MiB per hash; existing hashes keep the parameters they were made with.',
  }),
  passwordHashConcurrency: opt.int({
    flag: 'password-hash-concurrency', env: 'SYNC_PASSWORD_HASH_CONCURRENCY', default: 2, min: 1, max: 64,
    doc: 'Password hashes (login, register) computed at once; must be below UV_THREADPOOL_SIZE (default 4) so file I/O always has a libuv thread.',
  }),
  passwordHashQueue: opt.int({
    flag: 'password-hash-queue', env: 'SYNC_PASSWORD_HASH_QUEUE', default: 32, min: 0, max: 10_000,
    doc: 'Logins and registrations that may wait for a hashing slot; past it they get 503 with Retry-After.',
  }),
  attachmentMaxBytes: opt.int({
    flag: 'attachment-max-bytes', env: 'SYNC_ATTACHMENT_MAX_BYTES', default: 25 * 1024 * 1024, min: 1,
    doc: 'Largest accepted attachment, in bytes (25 MiB by default); a larger upload is refused with 413.',
  }),
  attachmentDir: opt.optionalString({
    flag: 'attachment-dir', env: 'SYNC_ATTACHMENT_DIR',
    doc: 'Directory holding attachment files; with several instances, one directory they all share. Default: with DATABASE_URL none (the bytes are stored in PostgreSQL), else <data-dir>/attachments.',
  }),
  feedHeartbeatMs: opt.int({
    flag: 'feed-heartbeat-ms', env: 'SYNC_FEED_HEARTBEAT_MS', default: 30_000, min: 100, max: 600_000,
    doc: 'Interval of the change feed\'s heartbeat: each WebSocket is pinged and its token and membership are checked again.',
  }),
  feedAllowedOrigins: opt.list({
    flag: 'feed-allowed-origins', env: 'SYNC_FEED_ALLOWED_ORIGINS', default: [],
    doc: 'Comma-separated origins (scheme://host[:port]) whose browser pages may open the change feed besides the service\'s own; an upgrade with another Origin gets 403. Clients that send no Origin (apps, agents) are not affected.',
  }),
  feedMaxSocketsPerUser: opt.int({
    flag: 'feed-max-sockets-per-user', env: 'SYNC_FEED_MAX_SOCKETS_PER_USER', default: 20, min: 1, max: 10_000,
    doc: 'Change-feed WebSockets one user may hold open on one instance; another upgrade gets 429.',
  }),
  resolvedConflictRetentionDays: opt.int({
    flag: 'resolved-conflict-retention-days', env: 'SYNC_RESOLVED_CONFLICT_RETENTION_DAYS', default: 30, min: 1, max: 3650,
    doc: 'Days a resolved conflict stays listable (status=resolved/all) after its resolution; the background cleanup then deletes it. Pending conflicts are never deleted.',
  }),
  pullPageSize: opt.int({
    flag: 'pull-page-size', env: 'SYNC_PULL_PAGE_SIZE', default: 500, min: 1,
    doc: 'Changes returned by one pull when the client gives no limit.',
  }),
  pullPageMax: opt.int({
    flag: 'pull-page-max', env: 'SYNC_PULL_PAGE_MAX', default: 10_000, min: 1,
    doc: 'Largest `limit` a pull may ask for: a device syncing a large business from nothing needs few requests of its user\'s rate limit.',
  }),
  pullPageBytes: opt.int({
    flag: 'pull-page-bytes', env: 'SYNC_PULL_PAGE_BYTES', default: 4 * 1024 * 1024, min: 1,
    doc: 'A pull page ends once the data of its changes reach this many characters of JSON (at least one change, whatever its size), so a page of large records stays a few MiB.',
  }),
};

export type SyncConfig = ConfigOf<typeof syncOptions>;

/** libuv's default thread pool size, used when UV_THREADPOOL_SIZE is not set, and the most it starts. */
const LIBUV_DEFAULT_POOL = 4;
const LIBUV_MAX_POOL = 1024;

export function loadSyncConfig(source: { argv?: string[]; env?: Record<string, string | undefined> } = {}): SyncConfig {
  const config = loadConfig(syncOptions, source);
  const problems: string[] = [];
  if (config.pullPageSize > config.pullPageMax) {
    problems.push(`--pull-page-size (${config.pullPageSize}) must not exceed --pull-page-max (${config.pullPageMax})`);
  }
  // The pool size is fixed by the environment at process start (libuv reads it once); hashing must leave threads for file I/O.
  const pool = libuvPoolSize(source.env?.['UV_THREADPOOL_SIZE']);
  if (config.passwordHashConcurrency >= pool) {
    problems.push(`--password-hash-concurrency (${config.passwordHashConcurrency}) must be below the libuv thread pool size (UV_THREADPOOL_SIZE=${pool}), so attachment file I/O never waits behind password hashing`);
  }
  for (const origin of config.feedAllowedOrigins) {
    if (!isOrigin(origin)) problems.push(`--feed-allowed-origins: "${origin}" is not an origin (scheme://host[:port], no path)`);
  }
  if (problems.length) throw new ConfigError(problems);
  // As browsers send them (`https://app.example.com`, lower case, no slash): compared as given, `.../` never matched.
  return { ...config, feedAllowedOrigins: config.feedAllowedOrigins.map((o) => new URL(o).origin) };
}

/**
 * The thread pool size libuv takes from UV_THREADPOOL_SIZE, read as libuv reads it (uv's threadpool.c: an unsigned
 * `atoi`, 0 taken as 1, at most 1024): `2.5` and `2x` are 2 threads, `0` and an empty value 1, a negative one 1024.
 */
export function libuvPoolSize(raw: string | undefined): number {
  if (raw === undefined) return LIBUV_DEFAULT_POOL;
  const n = Number.parseInt(raw, 10);
  if (!n) return 1;
  return n < 0 ? LIBUV_MAX_POOL : Math.min(n, LIBUV_MAX_POOL);
}

function isOrigin(raw: string): boolean {
  try {
    const u = new URL(raw);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === raw.replace(/\/$/, '').toLowerCase();
  } catch {
    return false;
  }
}

export function syncHelpText(): string {
  return helpText('sync-service serve: the business data sync service (users, businesses, push/pull, attachments, change feed).', syncOptions);
}
