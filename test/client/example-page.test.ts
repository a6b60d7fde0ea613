import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSync } from '../helpers/sync.js';

// The example page does not touch the database, so one backend is enough.
test('the example page is served from an allow-list under the security headers; no other file is reachable', async (t) => {
  const s = await startSync('sqlite');
  t.after(() => s.close());
  const redirect = await fetch(`${s.url}/example/`, { redirect: 'manual' });
  assert.equal(redirect.status, 302);
  assert.equal(redirect.headers.get('location'), '/example/index.html');
  const page = await fetch(`${s.url}/example/index.html`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.equal(page.headers.get('content-security-policy'), "default-src 'self'");
  assert.match(await page.text(), /<script type="module" src="example.js">/);
  const js = await fetch(`${s.url}/example/example.js`);
  assert.match(js.headers.get('content-type') ?? '', /^text\/javascript/);
  for (const probe of ['/example/..%2f..%2fpackage.json', '/example/%2e%2e%2fpackage.json', '/example/example.ts', '/example/fleetsync-client.js.map']) {
    const r = await fetch(s.url + probe);
    assert.equal(r.status, 404, probe);
    assert.equal((await r.json() as { error: string }).error, 'not_found');
  }
});
