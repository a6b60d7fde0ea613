import { isUtf8 } from 'node:buffer';
import { AppError } from '../errors.js';

/**
 * The text of body bytes, which must be UTF-8 (RFC 8259 8.1). Decoding is never lenient: bytes that are not UTF-8
 * would become U+FFFD, silently changing what is stored, and two distinct keys could decode to one, dropping a field.
 * Throws `invalid_request`.
 */
export function utf8Text(bytes: Uint8Array, what = 'body'): string {
  if (!isUtf8(bytes)) throw new AppError('invalid_request', `${what}: not valid UTF-8`);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}
