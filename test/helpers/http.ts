import { once } from 'node:events';
import { connect } from 'node:net';
import type { App } from '../../src/core/http/create-app.js';

/** Starts `app` on an ephemeral loopback port and returns its base URL. */
export async function listen(app: App): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no TCP address');
  return `http://127.0.0.1:${addr.port}`;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read loosely shaped JSON bodies
export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A small fetch wrapper for tests: JSON in, JSON (or text) out, optional bearer token. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read loosely shaped JSON bodies
export async function call<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  opts: { token?: string; json?: unknown; body?: string | Buffer | FormData; headers?: Record<string, string> } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | Buffer | FormData | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.body !== undefined) {
    body = opts.body;
  }
  const res = await fetch(baseUrl + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

/** Writes raw bytes on a fresh connection to `port` and resolves with everything received once the server closes it. */
export async function rawExchange(port: number, data: string | Buffer): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let received = '';
  socket.on('data', (c: Buffer) => { received += String(c); });
  socket.on('error', () => undefined);
  socket.write(data);
  await once(socket, 'close');
  return received;
}
