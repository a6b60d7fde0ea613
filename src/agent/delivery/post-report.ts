import http from 'node:http';
import https from 'node:https';
import { parseRetryAfter } from './backoff.js';
import { signBody } from './sign-body.js';

/** What the delivery loop does with a report after one attempt. */
export type PostOutcome =
  /** 2xx: the service stored it; 202 carries alert routing results worth logging. */
  | { kind: 'delivered'; status: number; alertResults?: unknown }
  /** A 4xx other than 408/429: sending it again cannot succeed (bad token, bad report). */
  | { kind: 'rejected'; status: number; error: string; details: string }
  /** Unreachable, timed out, 5xx, 408 or 429: try again later, after `retryAfterMs` when the service said so. */
  | { kind: 'retry'; status?: number; reason: string; retryAfterMs?: number };

export interface PostTarget {
  /** Base URL of the metrics service; the report goes to `<url>/api/v1/ingest`. */
  url: string;
  token: string;
  /** HMAC key; when set, the body is signed. */
  secret?: string | undefined;
  timeoutMs: number;
}

/** Responses are read up to this size for their `details`; a larger body is not an answer from our service. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export function ingestUrl(base: string): URL {
  return new URL('api/v1/ingest', base.endsWith('/') ? base : `${base}/`);
}

/**
 * One keep-alive connection per process: reports go one at a time, in order,
 * and a spool drain reuses it. Node honours the server's `Keep-Alive: timeout`
 * hint, so an idle socket is dropped before the service closes it.
 */
const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 1 }), https: new https.Agent({ keepAlive: true, maxSockets: 1 }) };

/** POSTs one report body (exact bytes, signed when a secret is set) and classifies the answer. Never throws. */
export function postReport(target: PostTarget, body: Buffer, signal?: AbortSignal): Promise<PostOutcome> {
  const url = ingestUrl(target.url);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': body.length,
    authorization: `Bearer ${target.token}`,
    'user-agent': 'host-agent/0.1',
  };
  if (target.secret) headers['x-collector-signature'] = signBody(target.secret, body);
  const isHttps = url.protocol === 'https:';
  return new Promise<PostOutcome>((resolve) => {
    let settled = false;
    const done = (o: PostOutcome) => { if (!settled) { settled = true; resolve(o); } };
    const req = (isHttps ? https : http).request(url, {
      method: 'POST', headers, agent: isHttps ? agents.https : agents.http, timeout: target.timeoutMs, signal,
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => { size += c.length; if (size <= MAX_RESPONSE_BYTES) chunks.push(c); });
      res.on('error', (e) => done({ kind: 'retry', status: res.statusCode, reason: e.message }));
      res.on('end', () => done(classify(res.statusCode ?? 0, res.headers['retry-after'], Buffer.concat(chunks).toString('utf8'))));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${target.timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) => done({ kind: 'retry', reason: e.code ? `${e.code}: ${e.message}` : e.message }));
    req.end(body);
  });
}

function classify(status: number, retryAfter: string | undefined, text: string): PostOutcome {
  let json: { error?: unknown; details?: unknown; alertResults?: unknown } | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') json = parsed;
  } catch { /* not JSON (a proxy's HTML error page): its text stands in for details */ }
  if (status >= 200 && status < 300) return { kind: 'delivered', status, alertResults: json?.alertResults };
  const error = typeof json?.error === 'string' ? json.error : `http_${status}`;
  const details = typeof json?.details === 'string' ? json.details : json ? '' : text.slice(0, 500);
  if (status >= 500 || status === 429 || status === 408 || status < 200) {
    return { kind: 'retry', status, reason: `${status} ${error}${details ? `: ${details}` : ''}`, retryAfterMs: parseRetryAfter(retryAfter, Date.now()) };
  }
  // 3xx lands here too: a redirect on a POST of telemetry is a misconfigured URL, not something to follow blindly.
  return { kind: 'rejected', status, error, details };
}
