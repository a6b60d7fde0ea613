import http from 'node:http';
import { gunzipSync } from 'node:zlib';
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
  /**
   * Unreachable, timed out, 5xx, 3xx, 404, 408 or 429, or an answer that is not the bulk contract: try again later.
   * `timedOut`: a bulk body that made no progress or got no answer within the timeout (a smaller batch may get one).
   */
  | { kind: 'retry'; status?: number; reason: string; retryAfterMs?: number; timedOut?: true };

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

/** An endpoint under the service's base URL (which may carry a path of its own, behind a proxy). */
function serviceUrl(base: string, path: 'api/v1/ingest' | 'api/v1/ingest/bulk'): URL {
  return new URL(path, base.endsWith('/') ? base : `${base}/`);
}

/** The answer's body as a JSON object, or undefined (a proxy's HTML error page, say). */
function jsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed && typeof parsed === 'object' ? parsed as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
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

/** What came back from one POST: an answer (status, Retry-After, body text), or why there was none. */
type Answer = { status: number; retryAfter: string | undefined; location: string | undefined; text: string } | { failed: string; status?: number; timedOut?: true };

/**
 * The body is written in pieces of this size: each one the socket takes resets its idle timeout, so a slow upload
 * that moves is not cut (a single write is one piece however long it takes).
 */
const WRITE_CHUNK = 16 * 1024;

/**
 * One POST on the process's keep-alive connection. Never throws. Until the body is written (connecting included) the
 * bound is progress: `timeoutMs` without the socket taking a byte. From then on it is a deadline: `timeoutMs` for the
 * whole answer, to its last byte, since an idle timeout is reset by every byte and an answer trickling in would hold
 * delivery up for ever. Both are `timedOut`.
 */
function post(url: URL, headers: Record<string, string | number>, body: Buffer, timeoutMs: number, signal?: AbortSignal): Promise<Answer> {
  const client = url.protocol === 'https:' ? httpsClient() : { module: http, agent: httpAgent };
  return new Promise<Answer>((resolve) => {
    let settled = false;
    let deadline: NodeJS.Timeout | undefined;
    const done = (a: Answer) => { if (!settled) { settled = true; clearTimeout(deadline); resolve(a); } };
    const timedOut = (failed: string) => { done({ failed, timedOut: true }); req.destroy(); };
    const req = client.module.request(url, {
      method: 'POST', headers: { ...headers, 'content-length': body.length, 'user-agent': 'host-agent/0.1' }, agent: client.agent, signal, timeout: timeoutMs,
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => { size += c.length; if (size <= MAX_RESPONSE_BYTES) chunks.push(c); });
      res.on('error', (e) => done({ failed: e.message, ...(res.statusCode ? { status: res.statusCode } : {}) }));
      res.on('end', () => done({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], location: res.headers.location, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => { if (!deadline) timedOut(`no progress sending the request within ${timeoutMs} ms`); });
    req.on('finish', () => { deadline = setTimeout(() => timedOut(`no answer within ${timeoutMs} ms`), timeoutMs); });
    req.on('error', (e: NodeJS.ErrnoException) => done({ failed: e.code ? `${e.code}: ${e.message}` : e.message }));
    for (let at = 0; at < body.length; at += WRITE_CHUNK) req.write(body.subarray(at, at + WRITE_CHUNK));
    req.end();
  });
}

/**
 * Services known to lack the bulk endpoint, by base URL, with when that was seen: their batches go report by report
 * to `POST /api/v1/ingest` (the one endpoint the specification defines), and the bulk endpoint is tried again after
 * BULK_RECHECK_MS (the service may have been upgraded).
 */
const singleOnly = new Map<string, number>();
const BULK_RECHECK_MS = 3_600_000;

/**
 * POSTs an encoded batch (`encodeBatch`), signed when a secret is set, and
 * classifies the answer. A service without the bulk endpoint (404) gets the
 * batch's reports one by one instead. Never throws.
 */
export async function sendBatch(target: PostTarget, batch: EncodedBatch, signal?: AbortSignal): Promise<BatchOutcome> {
  const seen = singleOnly.get(target.url);
  const tryBulk = seen === undefined || Date.now() - seen >= BULK_RECHECK_MS;
  if (tryBulk) {
    const outcome = await sendBulk(target, batch, signal);
    if (outcome.kind !== 'retry' || outcome.status !== 404) {
      singleOnly.delete(target.url);
      return outcome;
    }
  }
  const outcome = await sendOneByOne(target, batch, signal);
  // A 404 there too is a wrong base path, not a service without the bulk endpoint: the batch waits as before.
  if (outcome.kind !== 'retry' || outcome.status !== 404) singleOnly.set(target.url, tryBulk ? Date.now() : seen!);
  return outcome;
}

async function sendBulk(target: PostTarget, batch: EncodedBatch, signal?: AbortSignal): Promise<BatchOutcome> {
  const { body } = batch;
  const headers: Record<string, string | number> = {
    'content-type': 'application/x-ndjson',
    'content-encoding': 'gzip',
    authorization: `Bearer ${target.token}`,
  };
  if (target.secret) headers['x-collector-signature'] = signBody(target.secret, body);
  const answer = await post(serviceUrl(target.url, 'api/v1/ingest/bulk'), headers, body, target.timeoutMs, signal);
  if ('failed' in answer) return { kind: 'retry', ...(answer.status ? { status: answer.status } : {}), reason: answer.failed, ...(answer.timedOut ? { timedOut: true } : {}) };
  return classify(answer, batch.reports);
}

/**
 * The batch's reports, in order, each as one `POST /api/v1/ingest`, with one outcome per report as the bulk answer
 * gives them. A report the service refuses (400, 413, 422) is that report's outcome; anything to retry (no answer,
 * 5xx, 3xx, 404, 408, 429) stops the batch there, to be sent again whole: the reports already stored are then answered as
 * duplicates. A refusal of the request itself (401, 403) refuses the batch, as for a bulk body.
 */
async function sendOneByOne(target: PostTarget, batch: EncodedBatch, signal?: AbortSignal): Promise<BatchOutcome> {
  const url = serviceUrl(target.url, 'api/v1/ingest');
  const reports = gunzipSync(batch.body).toString('utf8').split('\n').filter((line) => line !== '');
  const lines: LineOutcome[] = [];
  let partial = false;
  for (const report of reports) {
    const body = Buffer.from(report);
    const headers: Record<string, string | number> = { 'content-type': 'application/json', authorization: `Bearer ${target.token}` };
    if (target.secret) headers['x-collector-signature'] = signBody(target.secret, body);
    const answer = await post(url, headers, body, target.timeoutMs, signal);
    if ('failed' in answer) return { kind: 'retry', ...(answer.status ? { status: answer.status } : {}), reason: answer.failed };
    const { status, text } = answer;
    const json = jsonObject(text);
    if (status === 200 || status === 202) {
      if (typeof json?.duplicate !== 'boolean') return { kind: 'retry', status, reason: `${status} answer that is not an ingest result` };
      partial ||= status === 202;
      lines.push({ status: json.duplicate ? 'duplicate' : 'stored', alertResults: json.alertResults });
      continue;
    }
    if (status === 400 || status === 413 || status === 422) {
      lines.push({ status: 'rejected', error: typeof json?.error === 'string' ? json.error : `http_${status}`, details: typeof json?.details === 'string' ? json.details : '' });
      continue;
    }
    const outcome = classify(answer, 1);
    // A 413 of a single report was taken above; what is left refuses or retries the batch as a whole.
    return outcome.kind === 'answered' ? { kind: 'retry', status, reason: `${status} answer to a single report` } : outcome;
  }
  return { kind: 'answered', status: partial ? 202 : 200, lines };
}

function classify({ status, retryAfter, location, text }: Extract<Answer, { status: number; text: string }>, sent: number): BatchOutcome {
  const json = jsonObject(text);
  if (status >= 200 && status < 300) {
    const results = Array.isArray(json?.results) ? (json.results as LineOutcome[]) : undefined;
    // Anything but one outcome per line leaves the batch spooled: removing reports on a guess could lose them.
    if (!results || results.length !== sent || !results.every((r) => ['stored', 'duplicate', 'rejected'].includes(r?.status))) {
      return { kind: 'retry', status, reason: `${status} answer without one result per report` };
    }
    return { kind: 'answered', status, lines: results };
  }
  // A redirect (an http URL behind a balancer that sends it to https, a moved service) is a misconfigured --url: a POST
  // of telemetry is not followed blindly, and the reports wait, with backoff, for the URL to be fixed.
  if (status >= 300 && status < 400) {
    return { kind: 'retry', status, reason: `${status} redirect to ${location ?? '(no Location)'}: the agent does not follow redirects; set --url to the service's address` };
  }
  const error = typeof json?.error === 'string' ? json.error : `http_${status}`;
  const details = typeof json?.details === 'string' ? json.details : json ? '' : text.slice(0, 500);
  // 404: a service without the bulk endpoint or a wrong base path; waiting keeps the reports for when it is fixed.
  if (status >= 500 || status === 429 || status === 408 || status === 404 || status < 200) {
    return { kind: 'retry', status, reason: `${status} ${error}${details ? `: ${details}` : ''}`, retryAfterMs: parseRetryAfter(retryAfter, Date.now()) };
  }
  if (status === 413) return { kind: 'too_large', status, details };
  return { kind: 'rejected', status, error, details };
}
