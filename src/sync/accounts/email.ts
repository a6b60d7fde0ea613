/**
 * E-mail addresses are compared case-insensitively (stored lower-cased), as
 * users expect from every sign-in form. The format check is the practical
 * subset of RFC 5322 that mail providers accept: one `@`, a local part of
 * printable ASCII without spaces, a domain of dot-separated labels.
 */
export const EMAIL_MAX_LENGTH = 254;
const EMAIL_RE = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

/** The normalized address, or undefined when `raw` is not a valid e-mail address. */
export function normalizeEmail(raw: string): string | undefined {
  const email = raw.trim();
  if (email.length > EMAIL_MAX_LENGTH || !EMAIL_RE.test(email)) return undefined;
  if (email.startsWith('.') || email.split('@')[0]!.endsWith('.') || email.includes('..')) return undefined;
  return email.toLowerCase();
}
