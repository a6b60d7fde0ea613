import type { AccountStore } from '../accounts/account-store.js';
import type { BusinessStore } from './business-store.js';

/** What the business domain functions need; `SyncDeps` satisfies it. */
export interface BusinessesContext {
  businesses: BusinessStore;
  accounts: AccountStore;
  now: () => number;
}
