/**
 * Headers sent on every response of both services: success, error, 404 and 429.
 * Values are those the sync specification requires; the metrics dashboard is
 * built to work under the same strict Content-Security-Policy.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'strict-transport-security': 'max-age=31536000',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'x-xss-protection': '1; mode=block',
  'content-security-policy': "default-src 'self'",
};
