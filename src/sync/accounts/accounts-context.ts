import type { RateLimiter } from '../../core/rate-limit/rate-limiter.js';
import type { SyncConfig } from '../config.js';
import type { AccountStore } from './account-store.js';

/** What the account domain functions need; `SyncDeps` satisfies it. */
export interface AccountsContext {
  accounts: AccountStore;
  rateLimiter: RateLimiter;
  now: () => number;
  config: Pick<SyncConfig, 'accessTokenTtlSeconds' | 'refreshTokenTtlSeconds' | 'lockoutThreshold' | 'lockoutSeconds' | 'scryptLog2N'>;
}
