import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createHttpApp, type App } from '../../src/core/http/create-app.js';
import { createLoadShedder } from '../../src/core/http/load-shedding.js';
import { isAppError } from '../../src/core/errors.js';
import { listen } from '../helpers/http.js';

/** An app whose expensive route waits on a gate the test opens; the principal is the x-who header. */
async function build(bounds: { maxInFlight: number; maxInFlightPerPrincipal: number }) {
  const app: App = createHttpApp({
    name: 'test', logLevel: 'silent', bodyLimit: 1024, trustProxy: [],
    loadShedding: { ...bounds, maxEventLoopDelayMs: 0, principal: (req) => req.headers['x-who'] as string | undefined },
  });
  let open!: () => void;
  let gate = new Promise<void>((r) => { open = r; });
  let started = 0;
  app.get('/heavy', { config: { expensive: true } }, async (req) => {
    started++;
    await gate;
    if (req.headers['x-fail']) throw new Error('boom');
    return { ok: true };
  });
  app.get('/cheap', async () => ({ ok: true }));
  const url = await listen(app);
  return {
    app, url,
    started: () => started,
    release() { open(); gate = new Promise<void>((r) => { open = r; }); },
  };
}

const get = (url: string, path: string, who?: string, extra: Record<string, string> = {}) =>
  fetch(url + path, { headers: { ...(who ? { 'x-who': who } : {}), ...extra } });

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await sleep(5);
}

test('expensive requests past the per-principal or instance bound get 503 unavailable with Retry-After at once; cheap routes are never refused', async (t) => {
  const s = await build({ maxInFlight: 3, maxInFlightPerPrincipal: 2 });
  t.after(async () => { s.release(); await s.app.close(); });
  const held = [get(s.url, '/heavy', 'a'), get(s.url, '/heavy', 'a')];
  await until(() => s.started() === 2);

  const third = await get(s.url, '/heavy', 'a');
  assert.equal(third.status, 503);
  assert.equal(third.headers.get('retry-after'), '1');
  const body = await third.json() as { error: string; details: string; retry_after: number };
  assert.equal(body.error, 'unavailable');
  assert.match(body.details, /your expensive requests/);
  assert.equal(body.retry_after, 1);
  assert.equal(third.headers.get('x-content-type-options'), 'nosniff', 'the 503 carries the security headers');

  held.push(get(s.url, '/heavy', 'b'));
  await until(() => s.started() === 3);
  const overInstance = await get(s.url, '/heavy', 'c');
  assert.equal(overInstance.status, 503, 'a fresh principal is refused once the instance bound is reached');
  assert.match((await overInstance.json() as { details: string }).details, /too many expensive requests in progress/);

  for (let i = 0; i < 20; i++) assert.equal((await get(s.url, '/cheap', 'a')).status, 200, 'cheap routes answer while the bounds are full');

  s.release();
  assert.deepEqual((await Promise.all(held)).map((r) => r.status), [200, 200, 200]);
  const again = get(s.url, '/heavy', 'a');
  await until(() => s.started() === 4);
  s.release();
  assert.equal((await again).status, 200, 'slots are released when the handler settles');
});

test('a failing or aborted expensive request releases its slot', async (t) => {
  const s = await build({ maxInFlight: 1, maxInFlightPerPrincipal: 1 });
  t.after(async () => { s.release(); await s.app.close(); });
  const failing = get(s.url, '/heavy', 'a', { 'x-fail': '1' });
  await until(() => s.started() === 1);
  s.release();
  assert.equal((await failing).status, 500);

  const controller = new AbortController();
  const aborted = fetch(`${s.url}/heavy`, { headers: { 'x-who': 'a' }, signal: controller.signal }).catch(() => 'aborted');
  await until(() => s.started() === 2);
  controller.abort();
  assert.equal(await aborted, 'aborted');
  s.release();
  // The aborted handler settles once the gate opens; its slot comes back then.
  let status = 503;
  while (status === 503) {
    const before = s.started();
    let answered = false;
    const next = get(s.url, '/heavy', 'a').then((r) => { answered = true; return r; });
    // Refused: a 503 at once. Admitted: the gate is opened once its handler waits there (a fixed sleep raced a slow machine).
    await until(() => answered || s.started() > before);
    s.release();
    status = (await next).status;
  }
  assert.equal(status, 200);
});

test('requests without a principal count against the instance bound only', async (t) => {
  const s = await build({ maxInFlight: 2, maxInFlightPerPrincipal: 1 });
  t.after(async () => { s.release(); await s.app.close(); });
  const held = [get(s.url, '/heavy'), get(s.url, '/heavy')];
  await until(() => s.started() === 2);
  assert.equal((await get(s.url, '/heavy')).status, 503);
  s.release();
  assert.deepEqual((await Promise.all(held)).map((r) => r.status), [200, 200]);
});

test('after the event loop stalls past the bound, expensive work is refused until a calm sample window', async () => {
  const shedder = createLoadShedder({ maxInFlight: 10, maxInFlightPerPrincipal: 10, maxEventLoopDelayMs: 100, sampleIntervalMs: 200 });
  try {
    shedder.acquire('a')();
    const until = Date.now() + 400;
    while (Date.now() < until) { /* stall the loop as a heavy synchronous request would */ }
    await sleep(1);
    assert.ok(shedder.eventLoopDelayMs() > 100, `the first sample after the stall shows it (${shedder.eventLoopDelayMs()} ms)`);
    assert.throws(() => shedder.acquire('a'), (e: unknown) => isAppError(e) && e.code === 'unavailable' && /event loop/.test(e.details ?? ''));
    while (shedder.eventLoopDelayMs() > 100) await sleep(50);
    shedder.acquire('a')();
  } finally {
    shedder.stop();
  }
});
