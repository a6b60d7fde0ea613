import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapeHtml, html } from '../../src/metrics/dashboard/html-template.js';
import { formatAbsolute, formatPercent, formatRelative } from '../../src/metrics/dashboard/format.js';
import { renderDashboard, STALE_AFTER_MS } from '../../src/metrics/dashboard/dashboard-page.js';
import type { HostLatest } from '../../src/metrics/domain/metrics-store.js';
import { renderSignIn } from '../../src/metrics/dashboard/signin-page.js';
import { loadStaticAssets } from '../../src/metrics/dashboard/static-assets.js';

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const HOSTILE = '<img src=x onerror=alert(1)>';

function host(over: Partial<HostLatest> = {}): HostLatest {
  return { hostId: 'web-1', hostname: 'web-1', platform: 'linux', lastTs: NOW - 12_000, cpuUsage: 42.25, memoryPercent: 61.04, diskPercent: 55, intervalMs: 10_000, ...over };
}

test('escapeHtml neutralises every character that can open markup or close an attribute', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&amp;</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;');
});

test('html escapes interpolations, keeps nested templates, joins arrays and drops null', () => {
  const inner = html`<b>${'<i>'}</b>`;
  assert.equal(html`<p title="${'"x"'}">${inner}${['a', '&']}${null}${undefined}${3}</p>`.value, '<p title="&quot;x&quot;"><b>&lt;i&gt;</b>a&amp;3</p>');
});

test('formatRelative covers seconds to days and a ts ahead of the server clock', () => {
  assert.equal(formatRelative(NOW - 2_000, NOW), 'just now');
  assert.equal(formatRelative(NOW - 42_000, NOW), '42 s ago');
  assert.equal(formatRelative(NOW - 5 * 60_000 - 1, NOW), '5 min ago');
  assert.equal(formatRelative(NOW - 3 * 3_600_000, NOW), '3 h ago');
  assert.equal(formatRelative(NOW - 2 * 86_400_000, NOW), '2 d ago');
  assert.equal(formatRelative(NOW + 30_000, NOW), 'in 30 s');
  assert.equal(formatAbsolute(NOW - 12_000), '2026-11-21 11:59:48 UTC');
  assert.equal(formatPercent(42.25), '42.3 %');
  assert.equal(formatPercent(null), '—');
});

test('the dashboard lists every host with CPU, memory and last report, relative and absolute', () => {
  const page = renderDashboard({ tenantName: 'acme', now: NOW, session: true, hosts: [host(), host({ hostId: 'db-1', hostname: 'db-1', platform: 'freebsd', cpuUsage: null, memoryPercent: 99.5, lastTs: NOW - 3_600_000 })] });
  assert.match(page, /^<!doctype html>/);
  assert.match(page, /2 hosts/);
  assert.match(page, /<span class="hostname">web-1<\/span>/);
  assert.match(page, /<meter [^>]*value="42\.3"[^>]*>42\.3 %<\/meter>/);
  assert.match(page, /61\.0 %/);
  assert.match(page, /12 s ago/);
  assert.match(page, /2026-11-21 11:59:48 UTC/);
  assert.match(page, /<time datetime="2026-11-21T11:59:48\.000Z"/);
  assert.match(page, /<span class="value missing">—<\/span>/, 'a host without cpu.usage shows a dash');
  assert.match(page, /<tr class="host stale">[\s\S]*db-1[\s\S]*stale<\/span>/, 'an hour-old report is flagged stale');
  assert.doesNotMatch(page.split('db-1')[0]!, /badge/, 'a fresh host is not flagged');
  assert.match(page, /<form class="signout" method="post" action="\/signout">/);
  assert.match(page, /Tenant <strong>acme<\/strong>/);
});

test('a host is stale only after the documented silence', () => {
  assert.doesNotMatch(renderDashboard({ tenantName: 'acme', now: NOW, session: false, hosts: [host({ lastTs: NOW - STALE_AFTER_MS })] }), /class="host stale"/);
  assert.match(renderDashboard({ tenantName: 'acme', now: NOW, session: false, hosts: [host({ lastTs: NOW - STALE_AFTER_MS - 1 })] }), /class="host stale"/);
});

test('agent-supplied hostname, host id and platform render only as text', () => {
  const page = renderDashboard({ tenantName: 'acme', now: NOW, session: false, hosts: [host({ hostname: HOSTILE, hostId: `"><script>alert(2)</script>`, platform: `Tom & Jerry's "OS" <b>` })] });
  assert.ok(!page.includes('<img'), 'no img element');
  assert.ok(!page.includes('<script'), 'no script element');
  assert.ok(!page.includes('<b>'));
  assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt;/);
  assert.match(page, /Tom &amp; Jerry&#39;s &quot;OS&quot; &lt;b&gt;/);
});

test('no page carries inline script, inline style or a third-party URL', () => {
  const pages = [
    renderDashboard({ tenantName: 'acme', now: NOW, session: true, hosts: [host()] }),
    renderDashboard({ tenantName: 'acme', now: NOW, session: false, hosts: [] }),
    renderSignIn({ error: 'That token is not valid.' }),
  ];
  for (const page of pages) {
    assert.doesNotMatch(page, /<script|<style|\sstyle=|\son\w+=/i);
    assert.doesNotMatch(page, /https?:\/\//, 'every URL is same-origin');
  }
});

test('bearer callers get no sign-out button; an empty tenant gets guidance', () => {
  const page = renderDashboard({ tenantName: 'acme', now: NOW, session: false, hosts: [] });
  assert.doesNotMatch(page, /signout/);
  assert.match(page, /No host has reported yet/);
});

test('the sign-in page posts the token to /signin and shows an error as text', () => {
  const page = renderSignIn({ error: `<b>bad</b>` });
  assert.match(page, /<form method="post" action="\/signin">/);
  assert.match(page, /<input id="token" name="token" type="password"/);
  assert.match(page, /&lt;b&gt;bad&lt;\/b&gt;/);
  assert.doesNotMatch(renderSignIn(), /role="alert"/);
});

test('every asset the pages link to is in the static allow-list', async () => {
  const assets = await loadStaticAssets();
  const linked = [...renderDashboard({ tenantName: 'acme', now: NOW, session: true, hosts: [host()] }).matchAll(/(?:href|src)="\/static\/([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(linked.length >= 2);
  for (const name of linked) assert.ok(assets.has(name), name);
  assert.equal(assets.get('dashboard.css')!.contentType, 'text/css; charset=utf-8');
});
