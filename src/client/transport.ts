// Why: every HTTP call of the client goes through one place that turns answers into typed errors and waits out 429s.
import { SyncClientError, type SyncErrorCode } from './errors.js';

export interface TransportOptions {
  /** Base URL of the sync service, e.g. `https://sync.example.com`. */
  baseUrl: string;
  /** The `fetch` to use (default: the global one). Tests and apps may wrap it. */
  fetch?: typeof fetch;
  /** How the client waits (default: a timer). */
  sleep?: (ms: number) => Promise<void>;
  /** 429 answers waited out before giving up (default 5). */
  maxRateLimitRetries?: number;
  /** A 429 asking to wait longer than this many seconds is thrown instead of waited (default 120). */
  maxRetryAfterSeconds?: number;
}

/** What `fetch` accepts as a body (named here: the project compiles without the DOM library). */
export type RequestBody = NonNullable<RequestInit['body']>;

export interface RequestOptions {
  token?: string | undefined;
  /** A JSON body (sent with `content-type: application/json`). */
  json?: unknown;
  /** Any other body; a function so a retried request gets a fresh one (streams are single-use). */
  body?: () => RequestBody;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** Extra fetch options (e.g. `duplex` for streamed bodies). */
  init?: Record<string, unknown>;
  /**
   * Safe to send again: a request that got no answer is sent again at once, up
   * to twice (a pooled keep-alive connection the server had just closed fails
   * without the server ever seeing the request, and after a quiet spell the pool
   * may hold more than one). Never set for refresh: a refresh token is spent by its first use.
   */
  idempotent?: boolean;
}

export interface Transport {
  readonly baseUrl: string;
  /** Sends a request; resolves with a 2xx response, or throws `SyncClientError` (429s are waited out first). */
  request(method: string, path: string, options?: RequestOptions): Promise<Response>;
  sleep(ms: number): Promise<void>;
}

/** Resends of an idempotent request that got no answer. */
const IDEMPOTENT_RESENDS = 2;

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function createTransport(o: TransportOptions): Transport {
  const baseUrl = o.baseUrl.replace(/\/+$/, '');
  const doFetch = o.fetch ?? ((input: string, init?: RequestInit) => globalThis.fetch(input, init));
  const sleep = o.sleep ?? defaultSleep;
  const maxRetries = o.maxRateLimitRetries ?? 5;
  const maxWait = o.maxRetryAfterSeconds ?? 120;

  async function once(method: string, path: string, r: RequestOptions): Promise<Response> {
    const headers: Record<string, string> = { ...r.headers };
    if (r.token) headers['authorization'] = `Bearer ${r.token}`;
    let body: RequestBody | undefined;
    if (r.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(r.json);
    } else if (r.body) {
      body = r.body();
    }
    try {
      return await doFetch(baseUrl + path, { method, headers, body, signal: r.signal, ...r.init } as RequestInit);
    } catch (e: unknown) {
      if (r.signal?.aborted) throw e;
      throw new SyncClientError('network', `${method} ${path}: no answer from the sync service`, { cause: e });
    }
  }

  return {
    baseUrl,
    sleep,
    async request(method, path, r = {}) {
      for (let attempt = 0; ; attempt++) {
        let res: Response;
        for (let resend = 0; ; resend++) {
          try {
            res = await once(method, path, r);
            break;
          } catch (e: unknown) {
            if (!(r.idempotent && e instanceof SyncClientError && e.code === 'network' && resend < IDEMPOTENT_RESENDS)) throw e;
          }
        }
        if (res.ok) return res;
        const error = await errorOf(res, method, path);
        // Waiting the time the server names is the contract of 429; hammering would only extend the limit.
        if (error.code === 'rate_limited' && attempt < maxRetries && error.retryAfter !== undefined && error.retryAfter <= maxWait) {
          await sleep(error.retryAfter * 1000);
          continue;
        }
        throw error;
      }
    },
  };
}

async function errorOf(res: Response, method: string, path: string): Promise<SyncClientError> {
  let body: { error?: unknown; details?: unknown; retry_after?: unknown } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // A bare status (a proxy, or the 408 Node writes itself) has no JSON body; the status still maps to a code.
  }
  const code = (typeof body.error === 'string' ? body.error : codeOfStatus(res.status)) as SyncErrorCode;
  const details = typeof body.details === 'string' ? body.details : undefined;
  const header = Number(res.headers.get('retry-after'));
  const retryAfter = typeof body.retry_after === 'number' ? body.retry_after : Number.isFinite(header) && header > 0 ? header : undefined;
  return new SyncClientError(code, `${method} ${path}: ${res.status} ${code}${details ? `: ${details}` : ''}`, {
    status: res.status, ...(details === undefined ? {} : { details }), ...(retryAfter === undefined ? {} : { retryAfter }),
  });
}

function codeOfStatus(status: number): SyncErrorCode {
  const byStatus: Record<number, SyncErrorCode> = { 400: 'invalid_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 409: 'conflict', 413: 'payload_too_large', 415: 'unsupported_media_type', 429: 'rate_limited', 503: 'unavailable' };
  return byStatus[status] ?? (status >= 500 ? 'internal' : 'invalid_request');
}
