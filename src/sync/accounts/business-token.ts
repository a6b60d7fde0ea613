import { AppError } from '../../core/errors.js';
import { generateToken, hashToken } from '../../core/auth/tokens.js';
import type { BusinessesContext } from '../businesses/businesses-context.js';
import { getBusiness } from '../businesses/businesses.js';
import type { AccountsContext } from './accounts-context.js';
import { TOKEN_PREFIX } from './sessions.js';

/**
 * A business-scoped access token for a member (404 unknown business, 403 not a
 * member, even one removed while it is issued). It joins the caller's refresh
 * family, so ending or revoking that session revokes it too, even one ending
 * while it is issued (401 then). It
 * has no refresh token of its own: the client asks for a new one with its
 * (refreshed) user token.
 */
export async function issueBusinessToken(
  ctx: AccountsContext & BusinessesContext,
  caller: { userId: string; familyId: string | undefined },
  businessId: string,
): Promise<{ token: string; expiresAt: number }> {
  await getBusiness(ctx, caller.userId, businessId);
  const now = ctx.now();
  const token = generateToken(TOKEN_PREFIX.business);
  const expiresAt = now + ctx.config.accessTokenTtlSeconds * 1000;
  const saved = await ctx.accounts.saveAccessToken(hashToken(token), { userId: caller.userId, businessId, familyId: caller.familyId, expiresAt }, now);
  if (saved === 'revoked') throw new AppError('unauthorized', 'the access token is invalid, expired or revoked');
  if (saved === 'not_member') throw new AppError('forbidden', 'you are not a member of this business');
  return { token, expiresAt };
}
