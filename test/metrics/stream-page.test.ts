// streamPage: the fast part of a page reaches the browser before the slow part is read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { html, type SafeHtml } from '../../src/metrics/dashboard/html-template.js';
import { streamPage } from '../../src/metrics/dashboard/stream-page.js';

async function serve(rest: (signal: AbortSignal) => Promise<SafeHtml>) {
  const logs: string[] = [];
  const app = Fastify({ logger: { level: 'error', stream: new Writable({ write(chunk, _enc, cb) { logs.push(String(chunk)); cb(); } }) } });
  app.get('/', (_req, reply) => streamPage(reply, { start: html`<main>start`, end: html`</main>` }, rest));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  return { app, logs, port };
}

function get(port: number): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => http.get({ host: '127.0.0.1', port, path: '/' }, resolve).on('error', reject));
}

function nextChunk(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve) => res.once('data', (c: Buffer) => resolve(c.toString())));
}

async function rest(res: http.IncomingMessage, first: string): Promise<string> {
  let body = first;
  for await (const c of res) body += String(c);
  return body;
}

test('the start of the page is sent before its rest is read; then the rest and the end', async (t) => {
  let release!: (v: SafeHtml) => void;
  const { app, port } = await serve(() => new Promise((resolve) => { release = resolve; }));
  t.after(() => app.close());
  const res = await get(port);
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(await nextChunk(res), '<main>start', 'the start arrives while the rest is still being read');
  release(html`<p>${'<slow & escaped>'}</p>`);
  assert.equal(await rest(res, '<main>start'), '<main>start<p>&lt;slow &amp; escaped&gt;</p></main>');
});

test('a rest that fails is logged and noted in the page, and the document is still closed', async (t) => {
  const { app, logs, port } = await serve(() => Promise.reject(new Error('disk on fire')));
  t.after(() => app.close());
  const res = await get(port);
  assert.equal(res.statusCode, 200);
  const body = await rest(res, '');
  assert.equal(body, '<main>start<p class="notice">Part of this page could not be read. Reload to try again.</p></main>');
  assert.ok(logs.some((l) => l.includes('disk on fire')), 'the failure is logged');
  assert.ok(!body.includes('disk on fire'), 'and not shown');
});

test('a browser that leaves before the rest is read aborts the rest\'s signal, and that is not logged as a failure', async (t) => {
  let seen!: AbortSignal;
  let started!: () => void;
  const running = new Promise<void>((resolve) => { started = resolve; });
  const { app, logs, port } = await serve((signal) => {
    seen = signal;
    started();
    return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
  });
  t.after(() => app.close());
  const res = await get(port);
  assert.equal(await nextChunk(res), '<main>start');
  await running;
  assert.equal(seen.aborted, false, 'not while the browser waits');
  res.destroy();
  await new Promise<void>((resolve) => { if (seen.aborted) resolve(); else seen.addEventListener('abort', () => resolve(), { once: true }); });
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(logs, [], 'a page nobody reads is no error');
});
