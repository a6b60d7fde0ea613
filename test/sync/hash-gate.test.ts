import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHashGate, inTurn } from '../../src/sync/accounts/hash-gate.js';
import { isAppError } from '../../src/core/errors.js';

describe('hash gate', () => {
  test('runs at most `concurrency` at once, queues up to `queue` in order, refuses the rest with 503 at once', async () => {
    const gate = createHashGate({ concurrency: 2, queue: 3 });
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const releases: (() => void)[] = [];
    const work = (i: number) => async () => {
      running++;
      peak = Math.max(peak, running);
      order.push(i);
      await new Promise<void>((resolve) => releases.push(resolve));
      running--;
    };
    const admitted = Array.from({ length: 5 }, (_, i) => inTurn(gate.enter(), work(i)));
    assert.equal(gate.inFlight, 5);
    assert.throws(() => gate.enter(), (e: unknown) => isAppError(e) && e.status === 503 && e.extra?.['retry_after'] === 1);
    while (order.length < 5 || releases.length) {
      await new Promise((resolve) => setImmediate(resolve));
      releases.shift()?.();
    }
    await Promise.all(admitted);
    assert.deepEqual(order, [0, 1, 2, 3, 4], 'first come, first served');
    assert.equal(peak, 2);
    assert.equal(gate.inFlight, 0);
  });

  test('a failing job frees its slot', async () => {
    const gate = createHashGate({ concurrency: 1, queue: 0 });
    await assert.rejects(inTurn(gate.enter(), async () => { throw new Error('boom'); }), /boom/);
    assert.equal(await inTurn(gate.enter(), async () => 'next'), 'next');
  });
});
