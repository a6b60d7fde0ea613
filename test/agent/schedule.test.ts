import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { startAgent } from '../../src/agent/start-agent.js';
import { captureLog, tempDir } from './agent-harness.js';

// Nothing listens on port 9: delivery backs off for a minute, and the test counts what collection spools.
test('a backward step of the system clock neither stops collection nor dates reports on the old clock', { timeout: 30_000 }, async (t) => {
  const spoolDir = tempDir();
  const realNow = Date.now;
  t.after(() => { Date.now = realNow; });
  const agent = await startAgent({ url: 'http://127.0.0.1:9', token: 'tok', spoolDir, intervalMs: 100, agentId: 'clock-step', retryBaseMs: 60_000, retryMaxMs: 60_000, log: captureLog().log });
  // Hooks run in the order they were added: the agent stops before its spool is removed. Removed first, a report
  // written meanwhile failed the removal (ENOTEMPTY), the stop never ran, and the running agent held the file open.
  t.after(async () => { await agent.stop(); rmSync(spoolDir, { recursive: true, force: true }); });
  await sleep(500);
  const before = agent.spool.length;
  assert.ok(before >= 2, `reports before the step (${before})`);
  // The clock steps back an hour (an NTP step, a VM booted with a wrong clock).
  Date.now = () => realNow() - 3_600_000;
  const stepped = realNow() - 3_600_000;
  await sleep(1_000);
  const after = agent.spool.length - before;
  assert.ok(after >= 5, `collection went on after the step: ${after} reports in 1 s at a 100 ms interval`);
  assert.ok(agent.spool.peekBatch(1_000, 1e9).at(-1)!.ts <= stepped + 2_000, 'reports carry the (stepped) wall-clock time');
});
