import { gunzip } from 'node:zlib';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.js';

/**
 * `Content-Encoding` of an ingest body: absent/identity or gzip (what agents
 * send); anything else is 415, since the bytes could not be read as sent.
 */
export function bodyEncoding(request: FastifyRequest): 'identity' | 'gzip' {
  const raw = request.headers['content-encoding'];
  const value = (Array.isArray(raw) ? raw.join(',') : raw ?? '').trim().toLowerCase();
  if (value === '' || value === 'identity') return 'identity';
  if (value === 'gzip' || value === 'x-gzip') return 'gzip';
  throw new AppError('unsupported_media_type', `Content-Encoding "${value}" is not supported; send gzip or no encoding`);
}

/**
 * Inflates a gzip body, stopping as soon as the output passes `limit` bytes
 * (zlib's maxOutputLength), so a decompression bomb costs at most `limit`
 * bytes of memory and is answered 413 without ever being inflated whole.
 */
export function gunzipLimited(body: Buffer, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    gunzip(body, { maxOutputLength: limit }, (err, out) => {
      if (!err) return resolve(out);
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
        return reject(new AppError('payload_too_large', `decompressed body is over the limit of ${limit} bytes`));
      }
      reject(new AppError('invalid_request', `body is not valid gzip: ${err.message}`));
    });
  });
}

/** The body as the service reads it: decoded per `Content-Encoding`, decompressed size bounded by `limit`. */
export async function decodeBody(request: FastifyRequest, raw: Buffer, limit: number): Promise<Buffer> {
  return bodyEncoding(request) === 'gzip' ? gunzipLimited(raw, limit) : raw;
}
