import http from 'node:http';
import type * as HttpsModule from 'node:https';
import { parseRetryAfter } from './backoff.js';
import type { EncodedBatch } from './encode-batch.js';
import { signBody } from './sign-body.js';

/** The service's answer for one report of a batch (one line of the bulk body). */
export interface LineOutcome {
  status: 'stored' | 'duplicate' | 'rejected';
  error?: string;
  details?: string;
  alertResults?: unknown;
}

/** What the delivery loop does with a batch after one attempt. */
export type BatchOutcome =
  /** 2xx: one outcome per report, in order; 202 when routing some alert failed. */
  | { kind: 'answered'; status: number; lines: LineOutcome[] }
  /** 413 for the whole body: the service's bulk limit is below this batch; send fewer reports at once. */
  | { kind: 'too_large'; status: 413; details: string }
  /** A 4xx other than 404/408/413/429 for the whole body: sending it again cannot succeed (bad token, bad signature). */
  | { kind: 'rejected'; status: number; error: string; details: string }
  /** Unreachable, timed out, 5xx, 404, 408 or 429, or an answer that is not the bulk contract: try again later. */
  | { kind: 'retry'; status?: number; reason: string; retryAfterMs?: number };

export interface PostTarget {
  /** Base URL of the metrics service; batches go to `<url>/api/v1/ingest/bulk`. */
  url: string;
  token: string;
  /** HMAC key; when set, the body (as sent, compressed) is signed. */
  secret?: string | undefined;
  timeoutMs: number;
}

/** Answers are read up to this size: a 10,000-line answer fits; a larger body is not an answer from our service. */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

export function bulkUrl(base: string): URL {
  return new URL('api/v1/ingest/bulk', base.endsWith('/') ? base : `${base}/`);
}

/**
 * One keep-alive connection per process: batches go one at a time, in order.
 * Node honours the server's `Keep-Alive: timeout` hint, so an idle socket is
 * dropped before the service closes it.
 */
const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });

let https: { module: typeof HttpsModule; agent: HttpsModule.Agent } | undefined;
/**
 * TLS is loaded only for an https URL: the module and its OpenSSL contexts cost a plain-HTTP agent about 3 MiB.
 * Through getBuiltinModule rather than import(), which would start Node's ESM loader inside the CommonJS bundle.
 */
function httpsClient(): NonNullable<typeof https> {
  if (!https) {
    const module = process.getBuiltinModule('node:https');
    https = { module, agent: new module.Agent({ keepAlive: true, maxSockets: 1 }) };
  }
  return https;
}

/**
 * POSTs an encoded batch (`encodeBatch`), signed when a secret is set, and
 * classifies the answer. Never throws.
 */
export async function sendBatch(target: PostTarget, batch: EncodedBatch, signal?: AbortSignal): Promise<BatchOutcome> {
  const { body } = batch;
  const url = bulkUrl(target.url);
  const headers: Record<string, string | number> = {
    'content-type': 'application/x-ndjson',
    'content-encoding': 'gzip',
    'content-length': body.length,
    authorization: `Bearer ${target.token}`,
    'user-agent': 'host-agent/0.1',
  };
  if (target.secret) headers['x-collector-signature'] = signBody(target.secret, body);
  const client = url.protocol === 'https:' ? httpsClient() : { module: http, agent: httpAgent };
  return new Promise<BatchOutcome>((resolve) => {
    let settled = false;
    const done = (o: BatchOutcome) => { if (!settled) { settled = true; resolve(o); } };
    const req = client.module.request(url, {
      method: 'POST', headers, agent: client.agent, timeout: target.timeoutMs, signal,
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => { size += c.length; if (size <= MAX_RESPONSE_BYTES) chunks.push(c); });
      res.on('error', (e) => done({ kind: 'retry', status: res.statusCode, reason: e.message }));
      res.on('end', () => done(classify(res.statusCode ?? 0, res.headers['retry-after'], Buffer.concat(chunks).toString('utf8'), batch.reports)));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${target.timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) => done({ kind: 'retry', reason: e.code ? `${e.code}: ${e.message}` : e.message }));
    req.end(body);
  });
}

function classify(status: number, retryAfter: string | undefined, text: string, sent: number): BatchOutcome {
  let json: { error?: unknown; details?: unknown; results?: unknown } | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') json = parsed;
  } catch { /* not JSON (a proxy's HTML error page): its text stands in for details */ }
  if (status >= 200 && status < 300) {
    const results = Array.isArray(json?.results) ? (json.results as LineOutcome[]) : undefined;
    // Anything but one outcome per line leaves the batch spooled: removing reports on a guess could lose them.
    if (!results || results.length !== sent || !results.every((r) => ['stored', 'duplicate', 'rejected'].includes(r?.status))) {
      return { kind: 'retry', status, reason: `${status} answer without one result per report` };
    }
    return { kind: 'answered', status, lines: results };
  }
  const error = typeof json?.error === 'string' ? json.error : `http_${status}`;
  const details = typeof json?.details === 'string' ? json.details : json ? '' : text.slice(0, 500);
  // 404: a service without the bulk endpoint or a wrong base path; waiting keeps the reports for when it is fixed.
  if (status >= 500 || status === 429 || status === 408 || status === 404 || status < 200) {
    return { kind: 'retry', status, reason: `${status} ${error}${details ? `: ${details}` : ''}`, retryAfterMs: parseRetryAfter(retryAfter, Date.now()) };
  }
  if (status === 413) return { kind: 'too_large', status, details };
  // 3xx lands here too: a redirect on a POST of telemetry is a misconfigured URL, not something to follow blindly.
  return { kind: 'rejected', status, error, details };
}
