import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSealDeferral } from '../../../src/metrics/storage/engine/seal-deferral.js';

/** The policy alone, on a clock the test moves: seals wait while appends come at a burst's rate, and never past maxMs. */
const W = (hostKey: number, windowStart = 0) => ({ hostKey, windowStart });
const settings = { busyReportsPerS: 1_000, maxMs: 120_000 };

test('at a quiet rate every due window is sealed', () => {
  const d = createSealDeferral(settings, 0);
  d.appended(400);
  assert.deepEqual(d.pick([W(1), W(2)], 500), [W(1), W(2)]); // 800 reports/s
});

test('at a busy rate no window is sealed until it has waited maxMs since it was first seen due', () => {
  const d = createSealDeferral(settings, 0);
  const busyPass = (due: Array<{ hostKey: number; windowStart: number }>, at: number) => { d.appended(1_000); return d.pick(due, at); }; // 2,000 reports/s
  assert.deepEqual(busyPass([W(1)], 500), []); // W1 due since 500
  const both = [W(1), W(2, 3_600_000)]; // W2 due since 1,000
  for (let at = 1_000; at < 500 + settings.maxMs; at += 500) assert.deepEqual(busyPass(both, at), [], `at ${at}`);
  assert.deepEqual(busyPass(both, 500 + settings.maxMs), [W(1)]);
  assert.deepEqual(busyPass(both, 1_000 + settings.maxMs), both);
});

test('the rate is judged since the previous pass, so a burst that ends lets the next pass seal everything', () => {
  const d = createSealDeferral(settings, 0);
  d.appended(5_000);
  assert.deepEqual(d.pick([W(1)], 500), []);
  d.appended(10);
  assert.deepEqual(d.pick([W(1)], 1_000), [W(1)]);
});

test('a window that left the due list (sealed meanwhile, or not due any more) starts its wait over', () => {
  const d = createSealDeferral({ busyReportsPerS: 1, maxMs: 1_000 }, 0);
  d.appended(10);
  assert.deepEqual(d.pick([W(1)], 500), []);
  d.appended(10);
  assert.deepEqual(d.pick([], 1_000), []);
  d.appended(10);
  assert.deepEqual(d.pick([W(1)], 1_400), []); // due since 1,400 now, not 500
  d.appended(10);
  assert.deepEqual(d.pick([W(1)], 2_400), [W(1)]);
});

test('within a pass: appends back at a busy rate stop the windows not yet overdue, after a span long enough to judge', () => {
  const d = createSealDeferral({ busyReportsPerS: 1_000, maxMs: 10_000 }, 0);
  d.appended(100);
  d.pick([W(1, 0)], 10_000); // quiet: W(1, 0) due since 10,000
  d.appended(2_000);
  d.pick([W(2, 0)], 10_500); // busy: W(2, 0) due since 10,500; W(1, 0) left the list
  d.appended(2_000);
  assert.deepEqual(d.pick([W(1, 0), W(2, 0)], 11_000), []); // rate since 10,500: 4,000/s
  d.appended(300);
  assert.equal(d.mayGoOn(W(1, 0), 11_100), true, '100 ms is too short to judge');
  assert.equal(d.mayGoOn(W(1, 0), 11_250), false, '1,200 reports/s over 250 ms');
  d.appended(20_000);
  assert.equal(d.mayGoOn(W(2, 0), 20_500), true, 'overdue: due since 10,500');
  assert.equal(d.mayGoOn(W(1, 0), 20_500), false, 'due since 11,000 only');
});
