import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import type { AccountsContext } from './accounts-context.js';
import type { User } from './account-store.js';
import { normalizeEmail } from './email.js';
import { dummyHash, hashPassword, verifyPassword } from './password-hash.js';
import { passwordProblem } from './password-policy.js';
import { parseDisplayName } from './display-name.js';
import { startSession, type SessionTokens } from './sessions.js';
import { countLoginAttempt, loginFailed, loginSucceeded } from './login-lockout.js';
import { inTurn } from './hash-gate.js';

export interface SignedIn {
  user: User;
  session: SessionTokens;
}

export const NAME_MAX_LENGTH = 200;

/** Creates the account (409 when the e-mail is taken) and signs it in. */
export async function registerUser(ctx: AccountsContext, input: { email: string; name: string; password: string }): Promise<SignedIn> {
  const email = normalizeEmail(input.email);
  if (!email) throw new AppError('invalid_request', 'email: is not a valid e-mail address');
  const name = parseDisplayName(input.name, 'name', NAME_MAX_LENGTH);
  const problem = passwordProblem(input.password, email);
  if (problem) throw new AppError('invalid_request', problem);
  const passwordHash = await inTurn(ctx.passwordHashes.enter(), () => hashPassword(input.password, ctx.config.scryptLog2N));
  const user: User = { id: randomUUID(), email, name, passwordHash, createdAt: ctx.now() };
  if (!(await ctx.accounts.createUser(user))) throw new AppError('conflict', 'an account with this e-mail address already exists');
  return { user, session: await startSession(ctx, user.id) };
}

const BAD_CREDENTIALS = 'the e-mail address or the password is incorrect';

/**
 * Signs in. An unknown e-mail and a wrong password get the same 401 after the
 * same work (a scrypt verification against a dummy hash), and count towards
 * the same lockout, so neither the answer, its timing nor the lockout reveals
 * whether an account exists. Admission to the hashing queue is decided first
 * (503 when full, nothing counted); then, in turn, the attempt is counted
 * before the password is checked, so parallel guesses cannot outrun the lockout.
 */
export async function loginUser(ctx: AccountsContext, input: { email: string; password: string }): Promise<SignedIn> {
  // The specification's rule for every e-mail field: an invalid format is a 400. The format reveals no account.
  const email = normalizeEmail(input.email);
  if (email === undefined) throw new AppError('invalid_request', 'email: not a valid e-mail address');
  const checked = await inTurn(ctx.passwordHashes.enter(), async () => {
    const attempt = await countLoginAttempt(ctx, email);
    try {
      const user = await ctx.accounts.findUserByEmail(email);
      const ok = await verifyPassword(input.password, user?.passwordHash ?? (await dummyHash(ctx.config.scryptLog2N)));
      return { attempt, user: ok ? user : undefined };
    } catch (e: unknown) {
      // A counted attempt always settles: one that errors counts as failed, so it can neither free nor wedge the count.
      await loginFailed(ctx, attempt);
      throw e;
    }
  });
  if (!checked.user) {
    await loginFailed(ctx, checked.attempt);
    throw new AppError('unauthorized', BAD_CREDENTIALS);
  }
  await loginSucceeded(ctx, checked.attempt);
  return { user: checked.user, session: await startSession(ctx, checked.user.id) };
}
