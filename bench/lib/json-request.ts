// Why: the benchmarks set up their users and businesses over the API; one JSON call for all of them.

/** A JSON request as a client makes it (bearer token, business header); the parsed answer, or an error past 2xx. */
export async function jsonRequest(url: string, method: string, p: string, token: string | undefined, body: unknown, businessId?: string): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers['authorization'] = `Bearer ${token}`;
  if (businessId) headers['x-business-id'] = businessId;
  const r = await fetch(url + p, { method, headers, body: JSON.stringify(body) });
  const out = (await r.json()) as Record<string, unknown>;
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(out)}`);
  return out;
}
