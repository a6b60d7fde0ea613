import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createLocalBlobStore } from '../../src/sync/attachments/local-blob-store.js';

test('at start, abandoned uploads are removed but a recent one (another instance on a shared directory) is kept', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'blobs-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const incoming = path.join(dir, '.incoming');
  mkdirSync(incoming);
  writeFileSync(path.join(incoming, 'crashed'), 'partial');
  const hourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(path.join(incoming, 'crashed'), hourAgo, hourAgo);
  writeFileSync(path.join(incoming, 'in-flight'), 'partial');
  await createLocalBlobStore(dir);
  assert.deepEqual(readdirSync(incoming), ['in-flight']);
});

test('put stores the exact bytes under a generated name; get and delete refuse names that are not UUIDs', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'blobs-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await createLocalBlobStore(dir);
  const blob = await store.put(Readable.from([Buffer.from('hello '), Buffer.from('world')]));
  assert.equal(blob.size, 11);
  assert.equal(blob.sha256, 'b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9');
  const got = await store.get(blob.storedName);
  const chunks: Buffer[] = [];
  for await (const c of got!.read()) chunks.push(c as Buffer);
  assert.equal(Buffer.concat(chunks).toString(), 'hello world');
  writeFileSync(path.join(os.tmpdir(), 'outside-blob-dir'), 'x');
  assert.equal(await store.get('../outside-blob-dir'), undefined);
  await store.delete('../outside-blob-dir');
  assert.deepEqual(readdirSync(os.tmpdir()).includes('outside-blob-dir'), true);
  rmSync(path.join(os.tmpdir(), 'outside-blob-dir'));
  await store.delete(blob.storedName);
  assert.equal(await store.get(blob.storedName), undefined);
});
