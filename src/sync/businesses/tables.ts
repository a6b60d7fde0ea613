import type { Role } from './role.js';

/** Row shapes of the business tables (migration 0001_accounts). Times are epoch milliseconds. */
export interface BusinessesTable {
  /** Lower-case UUID. */
  id: string;
  name: string;
  /** 11 digits, checksum-valid. */
  abn: string;
  created_by: string;
  created_at: number;
}

export interface MembershipsTable {
  business_id: string;
  user_id: string;
  role: Role;
  created_at: number;
}

export interface BusinessTables {
  businesses: BusinessesTable;
  memberships: MembershipsTable;
}
