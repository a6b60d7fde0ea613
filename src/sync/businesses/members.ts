import { AppError } from '../../core/errors.js';
import { normalizeEmail } from '../accounts/email.js';
import type { Member } from './business-store.js';
import type { BusinessesContext } from './businesses-context.js';
import type { Role } from './role.js';
import { getBusiness } from './businesses.js';

/** Every member may see who else belongs to the business. */
export async function listMembers(ctx: BusinessesContext, callerId: string, businessId: string): Promise<Member[]> {
  await getBusiness(ctx, callerId, businessId);
  return ctx.businesses.listMembers(businessId);
}

const NOT_OWNER = 'only an owner of the business can manage its members';

/** Answers 404/403 before anything else is looked at; the store checks the role again where it writes. */
async function requireOwner(ctx: BusinessesContext, callerId: string, businessId: string): Promise<void> {
  const b = await getBusiness(ctx, callerId, businessId);
  if (b.role !== 'owner') throw new AppError('forbidden', NOT_OWNER);
}

/**
 * An owner adds an existing user by e-mail (404 when no account has it, 409
 * when already a member). An owner removed meanwhile gets 403: ownership is
 * checked again where the membership is written.
 */
export async function addMember(ctx: BusinessesContext, callerId: string, businessId: string, input: { email: string; role: Role }): Promise<Member> {
  await requireOwner(ctx, callerId, businessId);
  const email = normalizeEmail(input.email);
  if (!email) throw new AppError('invalid_request', 'email: is not a valid e-mail address');
  const user = await ctx.accounts.findUserByEmail(email);
  if (!user) throw new AppError('not_found', 'no account has this e-mail address; the user must register first');
  const now = ctx.now();
  const outcome = await ctx.businesses.addMember(businessId, user.id, input.role, now, callerId);
  if (outcome === 'not_owner') throw new AppError('forbidden', NOT_OWNER);
  if (outcome === 'already_member') throw new AppError('conflict', 'this user is already a member of the business');
  return { userId: user.id, email: user.email, name: user.name, role: input.role, addedAt: now };
}

const NOT_OWNER_REMOVING = 'only an owner of the business can remove other members';

/**
 * An owner removes any member; any member may remove themselves (leave). The
 * last owner cannot be removed (409), so a business is never left unmanaged.
 * An owner removed meanwhile gets 403, as in addMember.
 */
export async function removeMember(ctx: BusinessesContext, callerId: string, businessId: string, userId: string): Promise<void> {
  const b = await getBusiness(ctx, callerId, businessId);
  if (b.role !== 'owner' && userId !== callerId) throw new AppError('forbidden', NOT_OWNER_REMOVING);
  const outcome = await ctx.businesses.removeMember(businessId, userId, callerId);
  if (outcome === 'not_allowed') throw new AppError('forbidden', NOT_OWNER_REMOVING);
  if (outcome === 'not_member') throw new AppError('not_found', 'this user is not a member of the business');
  if (outcome === 'last_owner') throw new AppError('conflict', 'the last owner of a business cannot be removed; make another member an owner first');
}
