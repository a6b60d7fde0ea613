// A full disk refuses writes with 503 and Retry-After, loses nothing it acknowledged, says so once in the log, and takes
// the same writes again once space is freed. The services run as their CLIs with their data or attachment directory
// on a small tmpfs (test/helpers/tmpfs.ts), so the disk really fills.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { nodeEntry } from '../helpers/node-entry.js';
import { spawnOnTmpfs, tmpfsSkip } from '../helpers/tmpfs.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport } from '../helpers/metrics.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { toErrorResponse } from '../../src/core/http/error-handler.js';
import { createLogThrottle, withHeld } from '../../src/core/log-throttle.js';

const skip = tmpfsSkip('the full-disk tests of both services');

test('storage full, as each store says it (SQLite, PostgreSQL disk_full, a file write, a quota), is a 503 to retry in 30 s, under any write', () => {
  for (const code of ['SQLITE_FULL', '53100', 'ENOSPC', 'EDQUOT']) {
    const r = toErrorResponse(Object.assign(new Error('full'), { code }), false);
    assert.equal(r.status, 503, code);
    assert.deepEqual(r.body, { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 });
    assert.equal(r.headers?.['retry-after'], '30');
  }
  for (const code of ['SQLITE_CORRUPT', '53200', 'EIO']) assert.equal(toErrorResponse(Object.assign(new Error('x'), { code }), false).status, 500, code);
});

test('a repeating log line is written first, then once per interval with how many were held back; other keys are their own', () => {
  let now = 0;
  const throttle = createLogThrottle(60_000, () => now);
  assert.deepEqual(throttle('disk full'), { held: 0 });
  now = 1_000;
  assert.equal(throttle('disk full'), undefined);
  assert.equal(throttle('disk full'), undefined);
  assert.deepEqual(throttle('other'), { held: 0 }, 'another message is not held behind the first');
  now = 61_000;
  assert.deepEqual(throttle('disk full'), { held: 2 });
  assert.equal(withHeld('the storage is full', 2), 'the storage is full (2 more since the last such line)');
  assert.equal(withHeld('the storage is full', 0), 'the storage is full');
  for (let i = 0; i < 150; i++) throttle(`key ${i}`);
  now = 62_000;
  assert.deepEqual(throttle('disk full'), { held: 0 }, 'forgotten past 100 keys: written as a first line');
});

interface Service { url: string; out: () => string; root: string; child: ChildProcess; stop: () => Promise<void> }

/** Starts `script` with `args` on a tmpfs at `dir` (see spawnOnTmpfs), after `before` (another run of it) there. */
async function startOnTmpfs(script: string, dir: string, size: string, fillerBytes: number, before: string[] | undefined, args: string[]): Promise<Service> {
  const node = [process.execPath, ...nodeEntry(script)];
  const child = spawnOnTmpfs(dir, size, fillerBytes, [...(before ? [[...node, ...before]] : []), [...node, ...args]], { LOG_LEVEL: 'info' });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { out += c.toString(); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (let i = 0; i < 600 && !/listening on http|"address":"http/.test(out) && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 50));
  const url = /listening on (http:\/\/[\d.:]+)/.exec(out)?.[1] ?? /"address":"(http:\/\/[\d.:]+)"/.exec(out)?.[1];
  if (!url) { child.kill('SIGKILL'); throw new Error(`the service did not start:\n${out}`); }
  return {
    url, child, out: () => out,
    root: `/proc/${child.pid}/root${dir}`,
    stop: async () => { child.kill('SIGTERM'); await exited; },
  };
}

/** The service's JSON log lines at error level whose message starts with `msg`. */
function errorLines(out: string, msg: string): Array<Record<string, unknown>> {
  return out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l['level'] === 50 && String(l['msg']).startsWith(msg));
}

test('metrics on a full disk: ingest gets 503 with Retry-After, reads go on, nothing acknowledged is lost, the refused report is taken once space is freed', { skip }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'full-metrics-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const m = await startOnTmpfs('src/metrics/cli.ts', dir, '768k', 256 * 1024, ['token', 'create', 'acme', '--data-dir', dir],
    // No floor: this is what a full disk does to writes when nothing stops them first.
    ['serve', '--data-dir', dir, '--port', '0', '--min-free-disk-bytes', '0']);
  t.after(m.stop);
  const token = /^token: +(\S+)$/m.exec(m.out())![1]!;
  const t0 = Date.now() - 3_600_000;
  let acked = 0;
  let refused;
  for (let i = 0; i < 20_000; i++) {
    // A new metric name now and then grows the name tables as well as the head.
    const r = await ingest(m.url, token, makeReport({ agentId: 'web-1', ts: t0 + i * 100, services: [{ name: `svc-${i % 500}`, status: 'running' }] }));
    if (r.status !== 200) { refused = { r, ts: t0 + i * 100, i }; break; }
    acked++;
  }
  assert.ok(refused, 'the disk filled');
  assert.ok(acked > 100 && acked < 10_000, `${acked} reports acknowledged first: within one read's points`);
  assert.equal(refused.r.status, 503, refused.r.text);
  assert.deepEqual(refused.r.body, { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 });
  assert.equal(refused.r.headers.get('retry-after'), '30');
  for (let k = 0; k < 5; k++) assert.equal((await ingest(m.url, token, makeReport({ agentId: 'web-1', ts: refused.ts }))).status, 503, 'still full');

  const read = async () => (await call(m.url, 'GET', `/api/v1/host/web-1?from=0&to=${t0 + 3_600_000}&points=10000`, { token })).body as { timestamps: number[] };
  assert.equal((await read()).timestamps.length, acked, 'every acknowledged report reads back while the disk is full');
  assert.equal(errorLines(m.out(), 'the storage is full').length, 1, 'one line for the operator, not one per refused write');
  assert.equal(errorLines(m.out(), 'request failed').length, 0, 'no 500s, no stacks');

  rmSync(`${m.root}/filler`);
  const retried = await ingest(m.url, token, makeReport({ agentId: 'web-1', ts: refused.ts, services: [{ name: `svc-${refused.i % 500}`, status: 'running' }] }));
  assert.equal(retried.status, 200, retried.text);
  assert.equal(retried.body.duplicate, false, 'the refused report was not stored');
  assert.equal((await read()).timestamps.length, acked + 1);
});

test('sync on a full attachment disk: an upload gets 503 with Retry-After and leaves no partial file; the same upload succeeds once space is freed', { skip }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'full-attach-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'full-attach-db-'));
  t.after(() => { rmSync(dir, { recursive: true, force: true }); rmSync(dataDir, { recursive: true, force: true }); });
  const s = await startOnTmpfs('src/sync/cli.ts', dir, '512k', 384 * 1024, undefined,
    ['serve', '--data-dir', dataDir, '--attachment-dir', dir, '--port', '0', '--min-free-disk-bytes', '0']);
  t.after(s.stop);
  const u = await newUser(s);
  const businessId = (await newBusiness(s, u)).id;
  const content = randomBytes(256 * 1024);
  const upload = () => {
    const form = new FormData();
    form.append('record_type', 'invoice');
    form.append('record_uuid', '6f1d9a52-6a43-4c65-9a1e-2b8f4f7c1d10');
    form.append('file', new Blob([content]), 'scan.pdf');
    return call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body: form, headers: { 'x-business-id': businessId } });
  };
  const refused = await upload();
  assert.equal(refused.status, 503, refused.text);
  assert.deepEqual(refused.body, { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 });
  assert.equal(refused.headers.get('retry-after'), '30');
  assert.deepEqual(readdirSync(`${s.root}/.incoming`), [], 'the partial upload is removed');
  assert.deepEqual(readdirSync(s.root).filter((f) => f !== '.incoming'), ['filler'], 'nothing stored');
  assert.equal(errorLines(s.out(), 'request failed').length, 0, 'no 500, no stack');

  rmSync(`${s.root}/filler`);
  const stored = await upload();
  assert.equal(stored.status, 201, stored.text);
  assert.equal(stored.body.size, content.length);
});

test('sync on a full database disk: a push (through its writer thread) gets the 503 and stores nothing; pulls go on; freed space takes it', { skip }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'full-sync-db-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const s = await startOnTmpfs('src/sync/cli.ts', dir, '1m', 256 * 1024, undefined, ['serve', '--data-dir', dir, '--port', '0', '--min-free-disk-bytes', '0']);
  t.after(s.stop);
  const u = await newUser(s);
  const businessId = (await newBusiness(s, u)).id;
  let n = 0;
  const batch = () => Array.from({ length: 100 }, () => ({ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { name: `customer ${n++}`, notes: 'x'.repeat(200) } }));
  const push = (changes: unknown[]) => call(s.url, 'POST', '/api/sync/push', { token: u.token, headers: { 'x-business-id': businessId }, json: { business_id: businessId, instance_id: 'device-1', changes } });
  const pull = async () => {
    const r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': businessId }, json: { business_id: businessId, since_version: 0, limit: 100000 } });
    assert.equal(r.status, 200, r.text);
    return (r.body.changes as unknown[]).length;
  };
  let accepted = 0;
  let refused: { changes: unknown[]; r: Awaited<ReturnType<typeof push>> } | undefined;
  while (!refused && accepted < 100_000) {
    const changes = batch();
    const r = await push(changes);
    if (r.status === 200) accepted += r.body.accepted as number;
    else refused = { changes, r };
  }
  assert.ok(refused, 'the disk filled');
  assert.equal(refused.r.status, 503, refused.r.text);
  assert.deepEqual(refused.r.body, { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 });
  assert.equal(await pull(), accepted, 'every accepted change, and none of the refused push');
  rmSync(`${s.root}/filler`);
  const again = await push(refused.changes);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.accepted, 100);
  assert.equal(await pull(), accepted + 100);
});

/** Free bytes of `dir` as an unprivileged process sees them (`stat -f`, through /proc/<pid>/root for a namespace's). */
function freeBytes(dir: string): number {
  const [avail, size] = execFileSync('stat', ['-f', '-c', '%a %S', dir], { encoding: 'utf8' }).trim().split(' ').map(Number);
  return avail! * size!;
}

test('metrics under --min-free-disk-bytes: ingest gets the same 503, the disk never fills, and sealing frees room so ingest resumes on its own', { skip }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'floor-metrics-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // The floor is room for what a seal pass writes before it frees anything (its blocks, and up to 4 MiB of WAL).
  const m = await startOnTmpfs('src/metrics/cli.ts', dir, '40m', 0, ['token', 'create', 'acme', '--data-dir', dir],
    ['serve', '--data-dir', dir, '--port', '0', '--min-free-disk-bytes', String(20 * 1024 * 1024)]);
  t.after(m.stop);
  const token = /^token: +(\S+)$/m.exec(m.out())![1]!;
  // Six hours ago, one report a second per host: windows long closed, so the head holds them until they are sealed.
  const t0 = Date.now() - 6 * 3_600_000;
  let n = 0;
  const body = () => Array.from({ length: 1000 }, () => {
    const host = `h${n % 20}`;
    return JSON.stringify(makeReport({ agentId: host, hostname: host, ts: t0 + Math.floor(n++ / 20) * 1000 }));
  }).join('\n');
  const bulk = (text: string) => call(m.url, 'POST', '/api/v1/ingest/bulk', { token, body: text, headers: { 'content-type': 'application/x-ndjson' } });
  let acked = 0;
  let refused: { text: string; r: Awaited<ReturnType<typeof bulk>> } | undefined;
  while (!refused && acked < 500_000) {
    const text = body();
    const r = await bulk(text);
    if (r.status === 200) acked += 1000;
    else refused = { text, r };
  }
  assert.ok(refused, 'refused before 500,000 reports');
  assert.equal(refused.r.status, 503, refused.r.text);
  assert.deepEqual(refused.r.body, { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 });
  assert.equal(refused.r.headers.get('retry-after'), '30');
  assert.ok(freeBytes(m.root) > 1_000_000, `the disk did not fill: ${freeBytes(m.root)} bytes free`);
  // No operator: the seal passes turn the head into blocks and hand the pages back, and the same body is taken.
  const deadline = Date.now() + 60_000;
  let again = await bulk(refused.text);
  while (again.status === 503 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    again = await bulk(refused.text);
  }
  assert.equal(again.status, 200, `${again.text}\n${freeBytes(m.root)} bytes free\n${m.out().split('\n').filter((l) => !l.includes('"level":30')).slice(-15).join('\n')}`);
  acked += 1000;
  const series = await call(m.url, 'GET', `/api/v1/host/h0?from=0&to=${Date.now()}&points=10000`, { token });
  assert.equal(series.body.timestamps.length, acked / 20, 'every acknowledged report of the host, once');
  const lines = m.out().split('\n');
  assert.equal(lines.filter((l) => l.includes('free disk space is under --min-free-disk-bytes')).length, 1);
  assert.equal(lines.filter((l) => l.includes('free disk space is back over --min-free-disk-bytes')).length, 1);
  assert.equal(lines.filter((l) => l.includes('SQLITE_FULL') || l.includes('disk is full')).length, 0, 'the disk never filled');
});

test('sync under --min-free-disk-bytes: pushes and uploads get the same 503 while pulls go on; freed space takes them again', { skip }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'floor-attach-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'floor-attach-db-'));
  t.after(() => { rmSync(dir, { recursive: true, force: true }); rmSync(dataDir, { recursive: true, force: true }); });
  // 2 MiB with 1.5 MiB taken: under a 1 MiB floor until the filler goes.
  const s = await startOnTmpfs('src/sync/cli.ts', dir, '2m', 1536 * 1024, undefined,
    ['serve', '--data-dir', dataDir, '--attachment-dir', dir, '--port', '0', '--min-free-disk-bytes', String(1024 * 1024)]);
  t.after(s.stop);
  const u = await newUser(s);
  const businessId = (await newBusiness(s, u)).id;
  const push = () => call(s.url, 'POST', '/api/sync/push', { token: u.token, headers: { 'x-business-id': businessId },
    json: { business_id: businessId, instance_id: 'device-1', changes: [{ table_name: 'customers', record_uuid: '0b5f3b0e-5f53-4a86-9a43-6f1b9d1c2e01', version: 1, operation: 'create', data: { name: 'Ann' } }] } });
  const upload = () => {
    const form = new FormData();
    form.append('record_type', 'invoice');
    form.append('record_uuid', '6f1d9a52-6a43-4c65-9a1e-2b8f4f7c1d10');
    form.append('file', new Blob([randomBytes(1024)]), 'scan.pdf');
    return call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body: form, headers: { 'x-business-id': businessId } });
  };
  const full = { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 };
  for (const r of [await push(), await upload()]) {
    assert.equal(r.status, 503, r.text);
    assert.deepEqual(r.body, full);
  }
  const pull = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': businessId }, json: { business_id: businessId, since_version: 0 } });
  assert.equal(pull.status, 200, pull.text);
  assert.deepEqual(pull.body.changes, [], 'the refused push stored nothing');
  rmSync(`${s.root}/filler`);
  const deadline = Date.now() + 10_000;
  let pushed = await push();
  while (pushed.status === 503 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    pushed = await push();
  }
  assert.equal(pushed.status, 200, pushed.text);
  assert.equal(pushed.body.accepted, 1);
  assert.equal((await upload()).status, 201);
});
