import type { Role } from './role.js';

export interface Business {
  /** Lower-case UUID. */
  id: string;
  name: string;
  abn: string;
  createdBy: string;
  createdAt: number;
}

export interface Member {
  userId: string;
  email: string;
  name: string;
  role: Role;
  addedAt: number;
}

export type AddOutcome = 'added' | 'already_member' | 'not_owner';
export type RemoveOutcome = 'removed' | 'not_member' | 'last_owner' | 'not_allowed';

/** Persistence of businesses and who belongs to them. */
export interface BusinessStore {
  /** Inserts the business and its creator as owner in one transaction. */
  createBusiness(business: Business): Promise<void>;
  findBusiness(id: string): Promise<Business | undefined>;
  /** The businesses `userId` belongs to, oldest first, with their role in each. */
  listBusinessesOf(userId: string): Promise<Array<Business & { role: Role }>>;
  /** The user's role in the business; undefined when not a member. */
  roleOf(businessId: string, userId: string): Promise<Role | undefined>;
  /** Whether the business exists and, if so, the user's role in it (undefined when not a member): one query, asked by every business-scoped request. */
  access(businessId: string, userId: string): Promise<{ exists: false } | { exists: true; role: Role | undefined }>;
  /** Which of `userIds` are members of the business (one query for many, as the feed's heartbeat needs). */
  membersAmong(businessId: string, userIds: readonly string[]): Promise<Set<string>>;
  /** Members in the order they joined. */
  listMembers(businessId: string): Promise<Member[]>;
  /**
   * Adds a membership if `addedBy` is an owner of the business when it is
   * written (`not_owner` otherwise); `already_member` when the user is one.
   * Serialized per business with `removeMember`, so an owner whose removal
   * has committed can add nobody.
   */
  addMember(businessId: string, userId: string, role: Role, now: number, addedBy: string): Promise<AddOutcome>;
  /**
   * Removes a membership unless it is the business's last owner, if
   * `removedBy` is an owner or the member themselves when it is written
   * (`not_allowed` otherwise; `not_member` and `last_owner` are answered
   * first). Serialized per business, so two owners removing each other at once
   * cannot leave none, and a removed owner removes nobody. The user's business
   * tokens for this business are deleted in the same transaction, so a later
   * re-add does not revive them.
   */
  removeMember(businessId: string, userId: string, removedBy: string): Promise<RemoveOutcome>;
}
