import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ErrorCode } from '../errors.js';
import { SECURITY_HEADERS } from './security-headers.js';

interface ClientErrorLike extends Error { code?: string }

/** What Node's HTTP parser or its timers reject, answered in the services' shape. */
function classify(err: ClientErrorLike): { status: number; body: { error: ErrorCode; details: string } } {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, body: { error: 'request_timeout', details: 'the request was not received in time' } };
  if (err.code === 'HPE_HEADER_OVERFLOW') return { status: 431, body: { error: 'header_too_large', details: 'the request headers are larger than the server accepts' } };
  return { status: 400, body: { error: 'invalid_request', details: 'malformed HTTP request' } };
}

function errorHead(body: string): Record<string, string> {
  return {
    ...SECURITY_HEADERS,
    // Refused before Fastify made a request of it: an id of its own, as every response carries one.
    'x-request-id': randomUUID(),
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    connection: 'close',
  };
}

/** The raw bytes of a Node-level error response: security headers, the `{error, details}` body, and the connection closed. */
export function clientErrorResponse(err: ClientErrorLike): string {
  const { status, body: error } = classify(err);
  const body = JSON.stringify(error);
  const headers = errorHead(body);
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${lines.join('\r\n')}\r\n\r\n${body}`;
}

/**
 * Fastify's `clientErrorHandler`: requests Node rejects before Fastify sees
 * them (malformed request line or headers, 400; headers or body too slow,
 * 408; headers too large, 431) get the same headers and body shape as every
 * other response, instead of Fastify's default `{"error","message","statusCode"}`
 * without security headers. The socket is then closed: after a parse error
 * the rest of the stream cannot be trusted to frame another request.
 */
export function onClientError(this: FastifyInstance, err: ClientErrorLike, socket: Socket): void {
  // A reset or destroyed socket has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  this.log.debug({ err: { code: err.code, message: err.message } }, 'client error');
  // As Node does: once a response has started on this socket, nothing more can be framed on it.
  const started = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (!socket.writable || started) {
    socket.destroy();
    return;
  }
  socket.once('finish', () => socket.destroy());
  socket.end(clientErrorResponse(err));
}

/**
 * The server's `checkExpectation` listener: an `Expect` other than
 * `100-continue` is refused (417, RFC 9110 section 10.1.1) in the services'
 * shape instead of Node's bare 417. The connection is closed because the
 * request body, if any, was never read.
 */
export function onCheckExpectation(req: IncomingMessage, res: ServerResponse): void {
  const body = JSON.stringify({ error: 'expectation_failed', details: `unsupported Expect: ${String(req.headers.expect).slice(0, 100)}; only 100-continue is supported` });
  res.writeHead(417, errorHead(body)).end(body);
}
