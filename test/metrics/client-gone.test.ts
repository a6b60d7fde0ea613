import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import Fastify from 'fastify';
import { clientGone } from '../../src/metrics/http/client-gone.js';

test('clientGone aborts when the client closes before the answer, and never after an answer went out', async () => {
  const app = Fastify();
  const signals: AbortSignal[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => { release = resolve; });
  app.get('/held', async (_req, reply) => {
    signals.push(clientGone(reply));
    await held;
    return { ok: true };
  });
  app.get('/quick', async (_req, reply) => {
    signals.push(clientGone(reply));
    return { ok: true };
  });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    assert.equal((await fetch(`${base}/quick`)).status, 200);
    const abandoned = request(`${base}/held`);
    abandoned.on('error', () => undefined);
    abandoned.end();
    while (signals.length < 2) await new Promise((r) => setTimeout(r, 5));
    abandoned.destroy();
    await new Promise<void>((resolve) => { signals[1]!.addEventListener('abort', () => resolve(), { once: true }); });
    release();
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(signals.map((s) => s.aborted), [false, true]);
  } finally {
    release();
    await app.close();
  }
});

test('clientGone asked for after the client already closed (its body read, then the connection gone) is aborted at once', async () => {
  const app = Fastify();
  let gone: AbortSignal | undefined;
  let asked!: () => void;
  const done = new Promise<void>((resolve) => { asked = resolve; });
  app.post('/late', async (req, reply) => {
    // The body is in; the handler takes its time (parsing a large bulk body) before it asks.
    while (!reply.raw.destroyed) await new Promise((r) => setTimeout(r, 5));
    gone = clientGone(reply);
    asked();
    return { ok: true };
  });
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const req = request(`${base}/late`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    req.on('error', () => undefined);
    req.end('{}', () => setTimeout(() => req.destroy(), 30));
    await done;
    assert.equal(gone!.aborted, true);
  } finally {
    await app.close();
  }
});
