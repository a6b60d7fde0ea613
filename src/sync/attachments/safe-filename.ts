/** Longest file name kept, in characters (common filesystem limit). */
export const MAX_FILENAME_LENGTH = 255;

/**
 * Control characters, invisible format characters (a right-to-left override
 * shows `\u202Egnp.exe` as `exe.png`; zero-width characters make two names look
 * alike), line or paragraph separators, and lone surrogates (a `filename*` in
 * UTF-16 can carry one: it has no UTF-8 form, so each database would store its
 * own replacement and the answer would not be the name kept).
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/**
 * The name shown for an uploaded file. It is display data only (storage uses
 * a generated UUID), but it travels back in headers and UIs, so: last path
 * segment only (either separator), none of HIDDEN's characters, trimmed, at most
 * 255 characters; an empty result, `.` or `..` becomes `file`.
 */
export function safeFilename(raw: string | undefined): string {
  const last = percentDecoded(raw ?? '').split(/[/\\]/).pop() ?? '';
  const cleaned = last.replace(HIDDEN, '').trim();
  const short = [...cleaned].slice(0, MAX_FILENAME_LENGTH).join('');
  return short === '' || short === '.' || short === '..' ? 'file' : short;
}

/**
 * The file name as the user saw it. Browsers and fetch's FormData write a
 * multipart file name with `"`, CR and LF percent-encoded (WHATWG HTML), and
 * RFC 7578 section 4.2 lets senders percent-encode names, so a name is decoded
 * (UTF-8) once; one that is not valid percent-encoded UTF-8 (`100%.txt`) is
 * kept as sent. Decoding comes before the path and control-character rules.
 */
function percentDecoded(name: string): string {
  if (!name.includes('%')) return name;
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/**
 * `Content-Disposition: attachment` per RFC 6266: an ASCII `filename` with
 * quotes, backslashes and anything outside printable ASCII replaced by `_`,
 * and the exact name as RFC 8187 `filename*` (UTF-8, percent-encoded).
 */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
