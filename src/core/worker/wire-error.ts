// Why: an error thrown in a worker thread reaches the service as the same kind of error (an AppError stays one, a driver code survives).
import { AppError, isAppError, type ErrorCode } from '../errors.js';

export interface WireError {
  message: string;
  code?: string;
  /** Set when the thread threw an AppError: rebuilt as one on the service side. */
  appCode?: string;
  details?: string;
  extra?: Record<string, unknown>;
}

export function toWireError(e: unknown): WireError {
  if (isAppError(e)) return { message: e.message, appCode: e.code, ...(e.details !== undefined ? { details: e.details } : {}), ...(e.extra ? { extra: e.extra } : {}) };
  const code = (e as { code?: unknown }).code;
  return { message: e instanceof Error ? e.message : String(e), ...(typeof code === 'string' ? { code } : {}) };
}

export function fromWireError(w: WireError): Error {
  if (w.appCode) return new AppError(w.appCode as ErrorCode, w.details, w.extra);
  return Object.assign(new Error(w.message), w.code ? { code: w.code } : {});
}
