import { createHmac } from 'node:crypto';
import { safeEqual } from '../../core/auth/tokens.js';

/**
 * Checks `x-collector-signature`: the hex HMAC-SHA256 of the exact request
 * body bytes under the shared secret, optionally written `sha256=<hex>`
 * (GitHub's webhook convention). Hex case is ignored; the comparison is
 * constant-time.
 */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (header === undefined) return false;
  const given = header.trim().replace(/^sha256=/i, '').toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(given)) return false;
  return safeEqual(signBody(secret, body), given);
}

export function signBody(secret: string, body: Buffer | string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}
