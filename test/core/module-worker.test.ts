// startModuleWorker runs a module beside its caller in a worker thread, with the data and the V8 limits it is given.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { SMALL_YOUNG_GENERATION, startModuleWorker } from '../../src/core/worker/module-worker.js';

async function run(resourceLimits?: typeof SMALL_YOUNG_GENERATION) {
  const worker = startModuleWorker(import.meta.url, '../fixtures/ready-worker', { n: 7 }, resourceLimits);
  try {
    const [message] = await once(worker, 'message') as [{ ready: boolean; workerData: unknown }];
    return { message, limits: worker.resourceLimits };
  } finally {
    await worker.terminate();
  }
}

test('a module worker gets its data, and SMALL_YOUNG_GENERATION as its young generation', async () => {
  const { message, limits } = await run(SMALL_YOUNG_GENERATION);
  assert.deepEqual(message, { ready: true, workerData: { n: 7 } });
  assert.equal(limits?.maxYoungGenerationSizeMb, 3);
});

test('without limits a module worker keeps V8\'s own young generation', async () => {
  const { limits } = await run();
  assert.notEqual(limits?.maxYoungGenerationSizeMb, 3);
});
