// Why: a download that broke off resumes from the bytes it has (HTTP Range, RFC 9110 section 14) instead of starting over.
import { combineRanges, parse } from 'range-parser';
import { AppError } from '../../core/errors.js';
import type { ByteRange } from './blob-store.js';

/** An attachment's entity tag: its SHA-256. Its bytes never change (another upload is another attachment), so the tag is strong. */
export function attachmentEtag(sha256: string): string {
  return `"${sha256}"`;
}

/**
 * The bytes of a file of `size` a download asks for, from its `Range` and `If-Range` headers: one byte range (or
 * several that merge into one) is that range. Anything else is the whole file, as RFC 9110 lets a server answer:
 * no Range, another unit, a malformed range, ranges that stay apart (no multipart answers), an `If-Range` other
 * than this file's ETag (a date included: there is no Last-Modified to compare with), an empty file. A Range of
 * bytes that selects none of the file is `416 range_not_satisfiable`, its `Content-Range` giving the size.
 */
export function requestedRange(size: number, range: string | undefined, ifRange: string | undefined, etag: string): ByteRange | undefined {
  if (range === undefined || size === 0) return undefined;
  if (ifRange !== undefined && ifRange.trim() !== etag) return undefined;
  const parsed = parse(size, range);
  if (parsed.type !== 'bytes' || parsed.code & 1) return undefined;
  if (!parsed.ranges.length) {
    const shown = range.length > 100 ? `${range.slice(0, 100)}...` : range;
    throw new AppError('range_not_satisfiable', `no byte of the range ${JSON.stringify(shown)} is within the file's ${size} bytes`, undefined, { 'content-range': `bytes */${size}` });
  }
  const merged = combineRanges(parsed.ranges);
  return merged.length === 1 ? { start: merged[0]!.start, end: merged[0]!.end } : undefined;
}
