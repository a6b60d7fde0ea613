/**
 * A member's role in a business. Owners manage members; every member may use
 * the business's data (sync, attachments, feed) and list its members.
 */
export const ROLES = ['owner', 'member'] as const;
export type Role = (typeof ROLES)[number];
