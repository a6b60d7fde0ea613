// A request thread answers by id; its errors arrive as the same kind of error; one that stops fails what it had pending.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../src/core/errors.js';
import { createThreadSlots, startRequestThread } from '../../src/core/worker/request-thread.js';

type Req = { do: 'echo' | 'refuse' | 'crash' | 'exit' | 'deep'; n: number };

test('answers each request with its own result, in any order of arrival; refusals stay AppErrors', async () => {
  let gone = 0;
  const t = startRequestThread<Req, { n: number; bytes: Float64Array }>(import.meta.url, '../fixtures/request-worker', () => { gone++; });
  try {
    const answers = await Promise.all([1, 2, 3].map((n) => t.send({ do: 'echo', n })));
    assert.deepEqual(answers.map((a) => [a.n, a.bytes[0]]), [[1, 1], [2, 2], [3, 3]]);
    assert.equal(t.pending, 0);
    await assert.rejects(t.send({ do: 'refuse', n: 4 }), (e: unknown) => e instanceof AppError && e.code === 'payload_too_large' && e.details === 'refused 4');
    await assert.rejects(t.send({ do: 'crash', n: 5 }), (e: unknown) => !(e instanceof AppError) && (e as Error).message === 'crashed 5');
    assert.equal((await t.send({ do: 'echo', n: 6 })).n, 6, 'still answering after an error');
    assert.equal(gone, 0);
  } finally {
    await t.terminate();
  }
});

test('a thread that stops rejects what it had pending as unavailable and tells its pool', async () => {
  let gone = 0;
  const t = startRequestThread<Req, unknown>(import.meta.url, '../fixtures/request-worker', () => { gone++; });
  const pending = [t.send({ do: 'exit', n: 1 }), t.send({ do: 'echo', n: 2 })];
  for (const p of pending) await assert.rejects(p, (e: unknown) => e instanceof AppError && e.code === 'unavailable');
  assert.equal(gone, 1);
  assert.equal(t.pending, 0);
});

test('an answer that cannot be read back fails the pending requests instead of leaving them waiting', { timeout: 20_000 }, async () => {
  let gone = 0;
  const t = startRequestThread<Req, unknown>(import.meta.url, '../fixtures/request-worker', () => { gone++; });
  try {
    await assert.rejects(t.send({ do: 'deep', n: 10_000 }), (e: unknown) => e instanceof AppError && e.code === 'internal');
    assert.equal(t.pending, 0);
    assert.equal(((await t.send({ do: 'echo', n: 2 })) as { n: number }).n, 2, 'the thread still answers');
    assert.equal(gone, 0);
  } finally {
    await t.terminate();
  }
});

test('a slot starts its thread on first use, keeps it, and starts another after it stopped', async () => {
  const slots = createThreadSlots<Req, { n: number }>(import.meta.url, '../fixtures/request-worker', 2);
  try {
    assert.equal(slots.pending(0), 0, 'nothing started yet');
    const first = slots.thread(0);
    assert.equal(slots.thread(0), first);
    assert.notEqual(slots.thread(1), first);
    const waiting = first.send({ do: 'echo', n: 1 });
    assert.equal(slots.pending(0), 1);
    assert.equal((await waiting).n, 1);
    await assert.rejects(first.send({ do: 'exit', n: 2 }), (e: unknown) => e instanceof AppError && e.code === 'unavailable');
    const next = slots.thread(0);
    assert.notEqual(next, first, 'a new thread for the stopped one');
    assert.equal((await next.send({ do: 'echo', n: 3 })).n, 3);
  } finally {
    await slots.terminate();
  }
});
