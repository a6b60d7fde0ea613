import { dictionary } from '@zxcvbn-ts/language-common';

/**
 * The password policy, after NIST SP 800-63B: length is what matters, so no
 * composition rules (they push users to predictable patterns). A password
 * must be 10 to 200 characters (Unicode code points, after NFC), must not be
 * only whitespace or one repeated character, must not be the e-mail address,
 * and must not be a commonly used password (ASVS V6.2.4). The upper bound
 * keeps hashing cost predictable.
 */
export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 200;

/**
 * About 49,000 passwords seen most often in breaches, from zxcvbn-ts's common
 * list; compared case-insensitively, since `Password12` is no better a guess.
 * Entries shorter than the minimum length are refused by length anyway.
 */
const COMMON_PASSWORDS: ReadonlySet<string> = new Set(
  dictionary['passwords-common'].filter((p) => p.length >= PASSWORD_MIN_LENGTH).map((p) => p.normalize('NFC').toLowerCase()),
);

/** The reason `password` breaks the policy, or undefined when it is acceptable. */
export function passwordProblem(password: string, email: string): string | undefined {
  const chars = [...password.normalize('NFC')];
  if (chars.length < PASSWORD_MIN_LENGTH) return `password must be at least ${PASSWORD_MIN_LENGTH} characters`;
  if (chars.length > PASSWORD_MAX_LENGTH) return `password must be at most ${PASSWORD_MAX_LENGTH} characters`;
  // \p{White_Space}, not trim(): trim keeps NEL (U+0085), which Unicode counts as white space.
  if (/^\p{White_Space}*$/u.test(password)) return 'password must not be only whitespace';
  if (new Set(chars).size === 1) return 'password must not be one repeated character';
  if (password.trim().toLowerCase() === email.trim().toLowerCase()) return 'password must not be the e-mail address';
  if (COMMON_PASSWORDS.has(password.normalize('NFC').toLowerCase())) return 'password is too common: it is on a list of passwords seen in breaches';
  return undefined;
}
