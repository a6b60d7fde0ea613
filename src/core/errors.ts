/**
 * The one catalogue of error codes. Domain code throws `AppError(code, details?)`;
 * the HTTP error handler maps the code to a status through `ERROR_STATUS` and
 * answers `{"error": code, "details": details}`. Nothing below the route layer
 * knows about HTTP statuses.
 */
export const ERROR_STATUS = {
  /** The request is malformed: bad JSON, wrong types, failed validation. */
  invalid_request: 400,
  /** No credentials, or credentials that do not resolve to a principal. */
  unauthorized: 401,
  /** Valid credentials that are not allowed to act on the resource. */
  forbidden: 403,
  /** The resource does not exist, or exists outside the caller's tenant/business. */
  not_found: 404,
  /** The route exists but not for this method. */
  method_not_allowed: 405,
  /** The request (headers or body) did not arrive in time; the connection is closed. */
  request_timeout: 408,
  /** The request conflicts with the current state (duplicate, not pending any more). */
  conflict: 409,
  /** The request body exceeds the documented limit. */
  payload_too_large: 413,
  /** The body is not in a media type the endpoint accepts. */
  unsupported_media_type: 415,
  /** A `Range` that selects no byte of the file (a download); its `Content-Range` gives the file's size. */
  range_not_satisfiable: 416,
  /** An `Expect` header other than `100-continue` (answered by the HTTP layer). */
  expectation_failed: 417,
  /** A documented bound was reached (metric names per host, members...). */
  limit_exceeded: 422,
  /** Too many requests; the body carries `retry_after` in seconds. */
  rate_limited: 429,
  /** The request's header section is larger than the server accepts (answered by the HTTP layer). */
  header_too_large: 431,
  /** Unexpected failure; details are logged, never sent. */
  internal: 500,
  /** A dependency (database, Redis) is unreachable, the server is shutting down, or it sheds load (`retry_after` in seconds). */
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: string | undefined;
  /** Extra fields merged into the JSON body (for example `retry_after`). */
  readonly extra: Record<string, unknown> | undefined;
  /** Response headers the answer needs besides the body (a 416's `Content-Range`). */
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, details?: string, extra?: Record<string, unknown>, headers?: Record<string, string>) {
    super(details ? `${code}: ${details}` : code);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
    this.extra = extra;
    this.headers = headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/**
 * `retry_after` of the 503 a closing instance answers: the balancer takes it out after two failed `/readyz` checks
 * a second apart, so a retry two seconds later goes to another instance.
 */
export const DRAINING_RETRY_AFTER_S = 2;

/** The 503 of a request that arrives at, or reaches a part of, an instance that is shutting down: retry elsewhere. */
export function shuttingDown(details = 'the server is shutting down; retry'): AppError {
  return new AppError('unavailable', details, { retry_after: DRAINING_RETRY_AFTER_S });
}

export function isAppError(e: unknown): e is AppError {
  return e instanceof AppError;
}
