import type { RateLimiter } from '../../core/rate-limit/rate-limiter.js';
import type { SyncConfig } from '../config.js';
import type { AccountStore } from './account-store.js';
import type { HashGate } from './hash-gate.js';

/** What the account domain functions need; `SyncDeps` satisfies it. */
export interface AccountsContext {
  accounts: AccountStore;
  rateLimiter: RateLimiter;
  /** Bounds concurrent password hashing (login, register). */
  passwordHashes: HashGate;
  now: () => number;
  config: Pick<SyncConfig, 'accessTokenTtlSeconds' | 'refreshTokenTtlSeconds' | 'sessionMaxAgeSeconds' | 'lockoutThreshold' | 'lockoutSeconds' | 'scryptLog2N'>;
}
