// Why: a database or Redis URL may carry a password, and start-up errors name the URL they could not reach.

/** Query parameters of a connection URL that hold a secret (libpq's `password` and `sslpassword`). */
const SECRET_PARAMS = ['password', 'sslpassword'];

/** The URL with its password (in the user part or the query) replaced by `***`, for error messages. */
export function redactConnectionUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const name of SECRET_PARAMS) if (u.searchParams.has(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return 'the configured URL';
  }
}
