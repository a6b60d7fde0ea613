/** Query parameters whose values never reach a log line. */
const SECRET_PARAMS = new Set(['token', 'access_token', 'refresh_token', 'signature', 'password', 'secret']);

/** Replaces the value of secret-bearing query parameters in a request URL. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const params = url.slice(q + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=');
    const key = decodeURIComponentSafe(eq === -1 ? pair : pair.slice(0, eq)).toLowerCase();
    return SECRET_PARAMS.has(key) ? `${pair.slice(0, eq === -1 ? pair.length : eq)}=[REDACTED]` : pair;
  });
  return `${url.slice(0, q)}?${params.join('&')}`;
}

function decodeURIComponentSafe(s: string): string {
  try { return decodeURIComponent(s); } catch { return s; }
}
