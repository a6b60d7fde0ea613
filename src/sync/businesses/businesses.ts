import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import type { Business } from './business-store.js';
import type { BusinessesContext } from './businesses-context.js';
import type { Role } from './role.js';
import { parseAbn } from './abn.js';
import { parseDisplayName } from '../accounts/display-name.js';

export const BUSINESS_NAME_MAX_LENGTH = 200;

export type BusinessView = Business & { role: Role };

/** Creates a business owned by its creator. ABNs are not unique: one entity may run several businesses. */
export async function createBusiness(ctx: BusinessesContext, userId: string, input: { name: string; abn: string }): Promise<BusinessView> {
  const name = parseDisplayName(input.name, 'name', BUSINESS_NAME_MAX_LENGTH);
  const parsed = parseAbn(input.abn);
  if ('problem' in parsed) throw new AppError('invalid_request', parsed.problem);
  const business: Business = { id: randomUUID(), name, abn: parsed.abn, createdBy: userId, createdAt: ctx.now() };
  await ctx.businesses.createBusiness(business);
  return { ...business, role: 'owner' };
}

export function listBusinesses(ctx: BusinessesContext, userId: string): Promise<BusinessView[]> {
  return ctx.businesses.listBusinessesOf(userId);
}

/** 404 when the business does not exist, 403 when the user is not a member. */
export async function getBusiness(ctx: BusinessesContext, userId: string, businessId: string): Promise<BusinessView> {
  const business = await ctx.businesses.findBusiness(businessId);
  if (!business) throw new AppError('not_found', 'no such business');
  const role = await ctx.businesses.roleOf(businessId, userId);
  if (!role) throw new AppError('forbidden', 'you are not a member of this business');
  return { ...business, role };
}
