import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { ingest, makeReport, startMetrics } from '../helpers/metrics.js';
import { skipUnless } from '../helpers/missing-tool.js';

/**
 * A real browser signs in and reads the dashboard. Debian's chromium is used
 * (installed by .ci/run, which sets CHROMIUM_PATH); when the path was given
 * explicitly a missing binary is a failure, otherwise the test is skipped.
 * SQLite only: the session store runs on both backends in dashboard.test.ts.
 */
const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM_PATH);
if (!available && process.env['CHROMIUM_PATH']) throw new Error(`CHROMIUM_PATH=${CHROMIUM_PATH} does not exist`);
const SKIP = skipUnless(available ? [] : [{ tool: 'chromium', skipped: 'the dashboard browser test', install: `apt-get install chromium, or CHROMIUM_PATH=<path to a Chromium binary> (looked at ${CHROMIUM_PATH})` }]);

const LAUNCH_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const HOSTILE = '<img src=x onerror=alert(1)>';

test('a person signs in with a token, sees the hosts safely rendered, and signs out', { skip: SKIP }, async (t) => {
  // A frozen service clock makes "30 s ago" exact however slow the browser is.
  const now = Date.now();
  const h = await startMetrics('sqlite', { now: () => now });
  t.after(() => h.close());
  const tenant = await h.newTenant('acme');
  const other = await h.newTenant('globex');
  const ts = now - 30_000;
  for (const [token, report] of [
    [tenant.token, makeReport({ agentId: 'web-1', hostname: 'web-1.acme', ts, cpu: { usage: 42.25 }, memory: { total: 8e9, used: 5e9, free: 3e9, percent: 61.04 } })],
    [tenant.token, makeReport({ agentId: 'evil', hostname: HOSTILE, platform: `Tom & Jerry's "OS"`, ts })],
    [other.token, makeReport({ agentId: 'other', hostname: 'globex-db', ts })],
  ] as const) {
    assert.equal((await ingest(h.url, token, report)).status, 200);
  }

  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: LAUNCH_ARGS });
  t.after(() => browser.close());
  const page = await browser.newPage();
  page.setDefaultTimeout(10_000);
  const dialogs: string[] = [];
  const consoleProblems: string[] = [];
  const foreignRequests: string[] = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); void d.dismiss(); });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') consoleProblems.push(m.text()); });
  page.on('pageerror', (e) => consoleProblems.push(e.message));
  page.on('request', (r) => { if (!r.url().startsWith(h.url)) foreignRequests.push(r.url()); });

  await page.goto(`${h.url}/`);
  assert.equal(new URL(page.url()).pathname, '/signin', 'an anonymous browser is sent to sign in');

  await page.fill('#token', 'mtk_wrong');
  await page.click('button[type=submit]');
  assert.match(await page.locator('.error').innerText(), /not valid/);
  assert.deepEqual(consoleProblems, ['Failed to load resource: the server responded with a status of 401 (Unauthorized)'], 'only the rejected sign-in');
  consoleProblems.length = 0;

  await page.fill('#token', tenant.token);
  await Promise.all([page.waitForURL(`${h.url}/`), page.click('button[type=submit]')]);
  const rows = page.locator('table.hosts tbody tr');
  assert.equal(await rows.count(), 2);
  const text = await page.locator('table.hosts').innerText();
  assert.match(text, /web-1\.acme/);
  assert.match(text, /42\.3 %/);
  assert.match(text, /61\.0 %/);
  assert.match(text, /30 s ago/);
  assert.ok(text.includes(HOSTILE), 'the hostile hostname is shown literally, as text');
  assert.ok(text.includes(`Tom & Jerry's "OS"`));
  assert.doesNotMatch(text, /globex/);
  assert.equal(await page.locator('img').count(), 0, 'no element was injected');
  assert.equal(await page.locator('meter').count(), 6, 'CPU, memory and fullest disk per host');
  // A string expression: it runs in the page, where the DOM types this Node project does not load exist.
  const cssApplied = await page.evaluate("getComputedStyle(document.querySelector('table.hosts')).borderCollapse");
  assert.equal(cssApplied, 'collapse', 'the same-origin stylesheet loaded under the CSP');
  const cookies = await page.context().cookies();
  assert.equal(cookies.length, 1);
  assert.equal(cookies[0]!.httpOnly, true);
  assert.equal(cookies[0]!.sameSite, 'Strict');

  await Promise.all([page.waitForURL(`${h.url}/signin`), page.click('form.signout button')]);
  assert.deepEqual(await page.context().cookies(), [], 'the cookie is gone');
  await page.goto(`${h.url}/`);
  assert.equal(new URL(page.url()).pathname, '/signin', 'signed out: back to sign-in');

  assert.deepEqual(dialogs, [], 'no script ran from agent text');
  assert.deepEqual(consoleProblems, [], 'no CSP violation or other console error');
  assert.deepEqual(foreignRequests, [], 'no third-party request');
});

test('with JavaScript the host list follows the fleet: a tenant\'s first host appears without a reload by hand, and the total follows the rows', { skip: SKIP, timeout: 60_000 }, async (t) => {
  const h = await startMetrics('sqlite');
  t.after(() => h.close());
  const tenant = await h.newTenant('acme');
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: LAUNCH_ARGS });
  t.after(() => browser.close());
  const page = await browser.newPage({ extraHTTPHeaders: { authorization: `Bearer ${tenant.token}` } });
  page.setDefaultTimeout(30_000);
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  // The page's clock runs as the real one until the test moves it on, so the test need not wait out the 10 s poll.
  await page.clock.install();
  await page.goto(`${h.url}/`);
  await page.locator('section.empty').waitFor();
  assert.equal((await ingest(h.url, tenant.token, makeReport({ agentId: 'first', hostname: 'first.acme' }))).status, 200);
  // The 10 s poll sees the host and the page draws the list.
  await page.clock.fastForward(10_000);
  await page.locator('table.hosts tr.host[data-host-id="first"]').waitFor();
  assert.equal(await page.locator('.counts .total').innerText(), '1 host');
  assert.equal((await ingest(h.url, tenant.token, makeReport({ agentId: 'second', hostname: 'second.acme' }))).status, 200);
  // A range picked loads the list at once, through the same drawing as the 10 s poll (which the first host waited for).
  await page.click('a[data-range="6h"]');
  await page.locator('table.hosts tr.host[data-host-id="second"]').waitFor();
  assert.equal(await page.locator('.counts .total').innerText(), '2 hosts');
  assert.equal(await page.locator('.count[data-status="up"] strong').innerText(), '2');
  assert.deepEqual(problems, []);
});
