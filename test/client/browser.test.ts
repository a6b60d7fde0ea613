import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { chromium, type Page } from 'playwright-core';
import { BACKENDS } from '../helpers/backends.js';
import { newBusiness, newUser, startSync } from '../helpers/sync.js';
// @ts-expect-error -- a plain ESM build script without type declarations
import { buildBrowserClient } from '../../scripts/build-browser-client.mjs';
import type * as ClientModuleNs from '../../src/client/index.js';

type ClientModule = typeof ClientModuleNs;

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

async function valueOf(page: Page, device: string): Promise<string> {
  return (await page.textContent(`[data-device="${device}"] .value`)) ?? '';
}

async function waitFor(page: Page, what: string, fn: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; A: ${await valueOf(page, 'A')}, B: ${await valueOf(page, 'B')}`);
    await page.waitForTimeout(50);
  }
}

async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} took more than ${ms} ms`)), ms); });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function save(page: Page, device: string, name: string): Promise<void> {
  await page.fill(`[data-device="${device}"] .name`, name);
  await page.click(`[data-device="${device}"] .edit button`);
  await waitFor(page, `${device} to show ${name}`, async () => (await valueOf(page, device)) === name);
}

describe('sync client in a browser', { concurrency: true }, () => {
  const bundle: Promise<string> = buildBrowserClient();

  for (const backend of BACKENDS) {
    test(`on ${backend}: the example page in Chromium: two devices with IndexedDB edit offline, survive a reload, reconnect and resolve the conflict`, { skip: !existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`, timeout: 150_000 }, async (t) => {
      const file = await bundle;
      assert.doesNotMatch(readFileSync(file, 'utf8'), /from\s*["']node:|require\(["'](fs|path|crypto|better-sqlite3)/, 'the browser bundle has no Node built-in');
      // After-hooks run in the order they were added: the service closes first, under the page's live clients (whose
      // feed reconnects meanwhile), as a real shutdown does. Each close is bounded, so a hang fails by name.
      const s = await startSync(backend);
      t.after(() => within(30_000, 'closing the sync service under the live page', s.close()));
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
      t.after(() => within(30_000, 'closing Chromium', browser.close()));
      const context = await browser.newContext();
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      // Failed loads are checked by URL below (the browser's own /favicon.ico probe is expected to 404).
      page.on('console', (m) => { if (m.type() === 'error' && !m.text().includes('offline (demo switch)') && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`); });
      page.on('response', (r) => { if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) problems.push(`${r.status()} ${r.url()}`); });

      await page.goto(`${s.url}/example/`);
      await page.click('#start');
      await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });
      await waitFor(page, 'both devices up to date (feed connected under the CSP)', async () =>
        (await page.getAttribute('[data-device="A"]', 'data-state')) === 'up-to-date' && (await page.getAttribute('[data-device="B"]', 'data-state')) === 'up-to-date');

      await save(page, 'A', 'Ann');
      await waitFor(page, 'B to hear of Ann through the feed', async () => (await valueOf(page, 'B')) === 'Ann');

      await page.uncheck('[data-device="A"] .online');
      await page.uncheck('[data-device="B"] .online');
      await save(page, 'A', 'Ann from A');
      await save(page, 'B', 'Ann from B');
      // Close the "tab": the offline edits live only in IndexedDB now. The page reopens both devices, online.
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]', { timeout: 20_000 });
      await waitFor(page, 'one device to show a conflict', async () => (await page.$$('.conflict')).length === 1);
      const withConflict = (await page.$('[data-device="A"] .conflict')) ? 'A' : 'B';
      const other = withConflict === 'A' ? 'B' : 'A';
      const mine = `Ann from ${withConflict}`;
      assert.match(await page.textContent(`[data-device="${withConflict}"] .conflict`) ?? '', new RegExp(`wrote "${mine}", the server has "Ann from ${other}"`));

      await page.click(`[data-device="${withConflict}"] .conflict button[data-choice="local"]`);
      // The other device can hear of the resolution through the feed before the resolving device has its answer and
      // redraws: the conflict goes from the page once both show the outcome, not necessarily at the same moment.
      await waitFor(page, 'both devices to converge and the conflict to go', async () =>
        (await valueOf(page, 'A')) === mine && (await valueOf(page, 'B')) === mine && (await page.$$('.conflict')).length === 0);
      const dbs = await page.evaluate(async () => (await (globalThis as unknown as { indexedDB: { databases(): Promise<{ name: string }[]> } }).indexedDB.databases()).map((d) => d.name));
      assert.equal(dbs.filter((n) => /^fleetsync-example-[AB]-/.test(n)).length, 2);
      // A second tab of the page is refused the devices' stores (Web Locks) instead of overwriting their outboxes;
      // once the first tab is gone, it opens them.
      const second = await context.newPage();
      second.on('pageerror', (e) => problems.push(`pageerror (second tab): ${e.message}`));
      await second.goto(`${s.url}/example/`);
      await waitFor(second, 'the second tab to be refused', async () => /open in another tab/.test((await second.textContent('#setup')) ?? ''));
      assert.equal(await second.getAttribute('body', 'data-ready'), null);
      await page.close();
      // Chromium lets go of a closed tab's locks a moment after page.close() resolves: a Start pressed in between is
      // refused again, and pressed again, as a user would once the other tab is gone.
      const started = Date.now();
      for (;;) {
        await second.evaluate(() => { (globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }).document.getElementById('setup').textContent = ''; });
        await second.click('#start');
        await waitFor(second, 'the second tab to start or be refused', async () =>
          (await second.getAttribute('body', 'data-ready')) === 'true' || /open in another tab/.test((await second.textContent('#setup')) ?? ''));
        if ((await second.getAttribute('body', 'data-ready')) === 'true') break;
        if (Date.now() - started > 20_000) throw new Error('the second tab was refused the stores 20 s after the first tab closed');
        await second.waitForTimeout(200);
      }
      await waitFor(second, 'the second tab to show the record', async () => (await valueOf(second, 'A')) === mine && (await valueOf(second, 'B')) === mine);
      const status = await fetch(`${s.url}/example/nope.js`);
      assert.equal(status.status, 404);
      assert.deepEqual(problems, []);
    });
  }

  test('an upload from the browser build (a Blob body: no request streams over HTTP/1.1) retries a PATCH the network dropped and stores the exact bytes', { skip: !existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`, timeout: 60_000 }, async (t) => {
    await bundle;
    const s = await startSync('sqlite');
    t.after(() => s.close());
    const user = await newUser(s);
    const business = await newBusiness(s, user);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
    t.after(() => browser.close());
    const page = await (await browser.newContext()).newPage();
    const patches: string[] = [];
    await page.route('**/api/sync/uploads/*', async (route) => {
      if (route.request().method() !== 'PATCH') return route.continue();
      patches.push(route.request().headers()['upload-offset'] ?? '');
      // The first PATCH never reaches the server, as on a network that drops it.
      return patches.length === 1 ? route.abort('connectionreset') : route.continue();
    });
    await page.goto(`${s.url}/example/index.html`);
    const outcome = await page.evaluate(async ({ baseUrl, businessId, email, password }) => {
      const { SyncClient, createMemoryStore } = await import('/example/fleetsync-client.js' as string) as ClientModule;
      const client = await SyncClient.open({ baseUrl, businessId, store: createMemoryStore(), retry: { baseMs: 10, maxMs: 50 } });
      await client.login({ email, password });
      const bytes = new Uint8Array(200_000).map((_, i) => (i * 7919) % 251);
      const att = await client.attachments.upload({ recordType: 'invoice', recordUuid: crypto.randomUUID(), filename: 'from-browser.bin', bytes });
      const back = await client.attachments.download(att.uuid, { expect: att });
      await client.close();
      return { size: att.size, same: back.length === bytes.length && back.every((b, i) => b === bytes[i]) };
    }, { baseUrl: s.url, businessId: business.id, email: user.email, password: user.password });
    assert.deepEqual(outcome, { size: 200_000, same: true });
    assert.deepEqual(patches, ['0', '0'], 'the dropped PATCH brought nothing, so the retry sends from byte 0');
  });

  test('the IndexedDB store applies a write whole or not at all: a value the browser cannot store leaves nothing of the write', { skip: !existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`, timeout: 60_000 }, async (t) => {
    await bundle;
    const s = await startSync('sqlite');
    t.after(() => s.close());
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
    t.after(() => browser.close());
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${s.url}/example/index.html`);
    const outcome = await page.evaluate(async () => {
      const client = await import('/example/fleetsync-client.js' as string) as ClientModule;
      const store = await client.createIndexedDbStore('atomicity-test');
      await store.claim();
      await store.write([{ op: 'put', collection: 'meta', key: 'kept', value: 1 }]);
      let error = '';
      try {
        // The second value is a symbol, which IndexedDB cannot clone: put throws when it is issued.
        await store.write([{ op: 'put', collection: 'meta', key: 'first', value: 1 }, { op: 'put', collection: 'meta', key: 'second', value: Symbol('not storable') }]);
      } catch (e: unknown) {
        error = (e as Error).name;
      }
      // Past the end of the refused write's transaction: a put it left issued would have committed by now.
      await new Promise((r) => setTimeout(r, 100));
      const read = [await store.get('meta', 'kept'), await store.get('meta', 'first'), await store.get('meta', 'second')];
      await store.write([{ op: 'put', collection: 'meta', key: 'after', value: 3 }]);
      read.push(await store.get('meta', 'after'));
      await store.close();
      return { error, read };
    });
    assert.deepEqual(outcome, { error: 'DataCloneError', read: [1, undefined, undefined, 3] }, 'nothing of the refused write; the store goes on');
  });
});
