// Why: every HTTP call of the client goes through one place that turns answers into typed errors, waits out 429s and is cut short by the client's close.
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
  /**
   * A request whose answer has not begun within this many milliseconds, or whose answer then stops arriving for as
   * long, fails with `network` (default 60000; 0: no limit), so a connection that went silent cannot hold up syncing
   * for good. Uploads' bodies are not limited: sending them takes as long as their size needs.
   */
  requestTimeoutMs?: number;
}

/** What `fetch` accepts as a body (named here: the project compiles without the DOM library). */
export type RequestBody = NonNullable<RequestInit['body']>;

export interface RequestOptions<T = Response> {
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
   * Not cut short by the client's close once sent: its answer must not be lost (a refresh: the server spends the
   * refresh token as it answers). It is still not sent, nor its 429 waited out, once the client is closed.
   */
  finishOnClose?: boolean;
  /**
   * Safe to send again: a request that got no answer is sent again at once, up
   * to twice (a pooled keep-alive connection the server had just closed fails
   * without the server ever seeing the request, and after a quiet spell the pool
   * may hold more than one). Never set for refresh: a refresh token is spent by its first use.
   */
  idempotent?: boolean;
  /**
   * Reads a 2xx answer's body into the result. It runs under the request's signals, so the caller's signal and the
   * client's close cut a body still arriving short too, and a body that breaks off fails as `network` (or `closed`)
   * like the request itself. Without it the request resolves with the Response at its headers.
   */
  read?: (res: Response) => Promise<T>;
}

export interface Transport {
  readonly baseUrl: string;
  /**
   * Sends a request; resolves with what `read` made of a 2xx answer (the Response itself without `read`), or throws
   * `SyncClientError` (429s are waited out first; `closed` once the client is closed, also for a request, a body
   * being read or a wait in progress).
   */
  request<T = Response>(method: string, path: string, options?: RequestOptions<T>): Promise<T>;
  /** Waits `ms`; rejects with `closed` at once when the client is closed. */
  sleep(ms: number): Promise<void>;
}

/** The `read` of an answer whose body is JSON. */
export function json<T>(res: Response): Promise<T> {
  return res.json() as Promise<T>;
}

/** Resends of an idempotent request that got no answer. */
const IDEMPOTENT_RESENDS = 2;

/** Failures of requests that timed out: not resent at once (the resends are for connections that fail before sending). */
const timedOut = new WeakSet<SyncClientError>();

/** `closing`: aborted by the client's close; every request and wait then rejects with `closed`. */
export function createTransport(o: TransportOptions, closing?: AbortSignal): Transport {
  const baseUrl = o.baseUrl.replace(/\/+$/, '');
  const doFetch = o.fetch ?? ((input: string, init?: RequestInit) => globalThis.fetch(input, init));
  const maxRetries = o.maxRateLimitRetries ?? 5;
  const maxWait = o.maxRetryAfterSeconds ?? 120;
  const timeoutMs = o.requestTimeoutMs ?? 60_000;
  const closed = (what: string) => new SyncClientError('closed', `${what}: the client was closed`);

  /** Waits `ms` (with `o.sleep` when given), or until the client is closed; the timer is cleared so it keeps no process alive. */
  function sleep(ms: number, what = 'wait'): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (closing?.aborted) { reject(closed(what)); return; }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onClose = () => { clearTimeout(timer); reject(closed(what)); };
      const forget = () => closing?.removeEventListener('abort', onClose);
      closing?.addEventListener('abort', onClose, { once: true });
      if (o.sleep) o.sleep(ms).then(() => { forget(); resolve(); }, (e: unknown) => { forget(); reject(e); });
      else timer = setTimeout(() => { forget(); resolve(); }, ms);
    });
  }

  /** One exchange: a non-2xx answer comes back unread (`value` absent), a 2xx one read by `r.read`. */
  async function once<T>(method: string, path: string, r: RequestOptions<T>): Promise<{ res: Response; value?: T }> {
    if (closing?.aborted) throw closed(`${method} ${path}`);
    const headers: Record<string, string> = { ...r.headers };
    if (r.token) headers['authorization'] = `Bearer ${r.token}`;
    let body: RequestBody | undefined;
    if (r.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(r.json);
    } else if (r.body) {
      body = r.body();
    }
    // One signal for the caller's, the client's close and the time limit, combined by hand: AbortSignal.any is newer
    // than the runtimes the client supports (Node 20.3, Safari 17.4).
    const request = new AbortController();
    // The signal's reason goes along: a caller who aborts with a reason gets that reason back.
    const abort = (event: Event) => request.abort((event.target as AbortSignal).reason);
    const linked = [r.signal, r.finishOnClose ? undefined : closing].filter((x): x is AbortSignal => x !== undefined);
    for (const signal of linked) {
      if (signal.aborted) request.abort(signal.reason);
      else signal.addEventListener('abort', abort, { once: true });
    }
    // The time limit, for the answer's start and then for each silence inside it: a request it cuts is `network`, and
    // not resent at once (see `timedOut`).
    let late = false;
    const giveUp = () => { late = true; request.abort(); };
    const tooLate = (what: string, cause: unknown) => {
      const error = new SyncClientError('network', `${method} ${path}: ${what}`, { cause });
      timedOut.add(error);
      return error;
    };
    const timer = timeoutMs > 0 && !r.body ? setTimeout(giveUp, timeoutMs) : undefined;
    try {
      let res: Response;
      try {
        res = await doFetch(baseUrl + path, { method, headers, body, signal: request.signal, ...r.init } as RequestInit);
      } catch (e: unknown) {
        if (r.signal?.aborted) throw e;
        if (closing?.aborted && !r.finishOnClose) throw closed(`${method} ${path}`);
        if (late) throw tooLate(`no answer within ${timeoutMs} ms`, e);
        throw new SyncClientError('network', `${method} ${path}: no answer from the sync service`, { cause: e });
      } finally {
        clearTimeout(timer);
      }
      if (!res.ok || !r.read) return { res };
      try {
        return { res, value: await r.read(timeoutMs > 0 ? watched(res, timeoutMs, giveUp) : res) };
      } catch (e: unknown) {
        if (r.signal?.aborted) throw e;
        if (closing?.aborted && !r.finishOnClose) throw closed(`${method} ${path}`);
        if (late) throw tooLate(`no byte of the answer for ${timeoutMs} ms`, e);
        if (e instanceof SyncClientError) throw e;
        // The connection broke off (or the bytes were not the JSON promised) after the answer began.
        throw new SyncClientError('network', `${method} ${path}: the answer broke off before its end`, { cause: e });
      }
    } finally {
      for (const signal of linked) signal.removeEventListener('abort', abort);
    }
  }

  return {
    baseUrl,
    sleep: (ms) => sleep(ms),
    async request<T = Response>(method: string, path: string, r: RequestOptions<T> = {}): Promise<T> {
      for (let attempt = 0; ; attempt++) {
        let answer: { res: Response; value?: T };
        for (let resend = 0; ; resend++) {
          try {
            answer = await once(method, path, r);
            break;
          } catch (e: unknown) {
            if (!(r.idempotent && e instanceof SyncClientError && e.code === 'network' && !timedOut.has(e) && resend < IDEMPOTENT_RESENDS)) throw e;
          }
        }
        const { res } = answer;
        if (res.ok) return r.read ? answer.value as T : res as T;
        const error = await errorOf(res, method, path);
        // Waiting the time the server names is the contract of 429; hammering would only extend the limit.
        if (error.code === 'rate_limited' && attempt < maxRetries && error.retryAfter !== undefined && error.retryAfter <= maxWait) {
          await sleep(error.retryAfter * 1000, `${method} ${path}`);
          continue;
        }
        throw error;
      }
    },
  };
}

/**
 * `res` with its body cut off, and `onIdle` called, once no byte of it has come for `ms`: a connection that goes
 * silent mid-answer (a mobile link that drops packets without a reset) would otherwise hold the read until TCP gives
 * up, many minutes later. A slow answer that keeps arriving is never cut.
 */
function watched(res: Response, ms: number, onIdle: () => void): Response {
  if (!res.body) return res;
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    pull: (controller) => new Promise<void>((resolve) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        onIdle();
        controller.error(new Error(`no byte for ${ms} ms`));
        reader.cancel().catch(() => undefined);
        resolve();
      }, ms);
      reader.read().then(({ done, value }) => {
        if (settled) return;
        clearTimeout(timer);
        if (done) controller.close();
        else controller.enqueue(value);
        resolve();
      }, (e: unknown) => {
        if (settled) return;
        clearTimeout(timer);
        controller.error(e);
        resolve();
      });
    }),
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
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
  // 408 is a proxy's or Node's own timeout for a request that came too slowly: to send again, never an item refused.
  const byStatus: Record<number, SyncErrorCode> = { 400: 'invalid_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 408: 'request_timeout', 409: 'conflict', 413: 'payload_too_large', 415: 'unsupported_media_type', 429: 'rate_limited', 503: 'unavailable' };
  return byStatus[status] ?? (status >= 500 ? 'internal' : 'invalid_request');
}
