import { createHmac } from 'node:crypto';

/** Value of `x-collector-signature`: `sha256=` and the hex HMAC-SHA256 of the exact body bytes sent. */
export function signBody(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}
