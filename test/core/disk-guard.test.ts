// The free-space floor: checked at start and then on a timer; one line when a directory goes under it and one when it
// is back; off at 0; a directory it cannot read says nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createDiskGuard } from '../../src/core/storage/disk-guard.js';
import { toErrorResponse } from '../../src/core/http/error-handler.js';

function fakeDisk(free: Record<string, number | Error>) {
  const reads: string[] = [];
  const statfs = async (dir: string) => {
    reads.push(dir);
    const f = free[dir];
    if (f instanceof Error) throw f;
    return { bavail: BigInt(Math.floor((f ?? 0) / 4096)), bsize: 4096n };
  };
  return { free, reads, statfs };
}

test('under the floor at start, writes are refused at once with the full disk\'s 503; back over it, taken; each change said once', async (t) => {
  const disk = fakeDisk({ '/data': 1_000_000, '/attachments': 100_000_000 });
  const lines: Array<[string, string, unknown]> = [];
  const guard = await createDiskGuard({ dirs: ['/data', '/attachments', '/data'], minFreeBytes: 4_000_000, intervalMs: 10, statfs: disk.statfs, service: 'test',
    log: (level, msg, fields) => lines.push([level, msg, fields.dir]) });
  t.after(() => guard.close());
  const hooked = (): Promise<Error | undefined> => new Promise((resolve) => guard.hook({} as never, {} as never, resolve));
  assert.equal(guard.paused(), true);
  const r = toErrorResponse(await hooked());
  assert.equal(r.status, 503);
  assert.deepEqual(r.body, { error: 'unavailable', details: "the server's storage is full; nothing was stored, retry later", retry_after: 30 });
  assert.equal(r.headers?.['retry-after'], '30');
  assert.deepEqual(disk.reads, ['/data', '/attachments'], 'each filesystem read once a round');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(lines.length, 1, 'still under: nothing more said');
  disk.free['/data'] = 8_000_000;
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(guard.paused(), false);
  assert.equal(await hooked(), undefined);
  disk.free['/attachments'] = 0;
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(guard.paused(), true);
  assert.deepEqual(guard.readings(), [{ dir: '/data', freeBytes: 7_999_488 }, { dir: '/attachments', freeBytes: 0 }], 'free bytes in whole blocks');
  assert.deepEqual(lines, [
    ['error', 'free disk space is under --min-free-disk-bytes: writes are refused (503) until space is freed', '/data'],
    ['info', 'free disk space is back over --min-free-disk-bytes: writes are taken again', '/data'],
    ['error', 'free disk space is under --min-free-disk-bytes: writes are refused (503) until space is freed', '/attachments'],
  ]);
});

test('a floor of 0 never reads the disk; a directory whose space cannot be read refuses nothing', async (t) => {
  const off = fakeDisk({ '/data': 0 });
  const none = await createDiskGuard({ dirs: ['/data'], minFreeBytes: 0, statfs: off.statfs, service: 'test', log: () => assert.fail('nothing to say') });
  t.after(() => none.close());
  assert.equal(none.paused(), false);
  assert.deepEqual(off.reads, []);
  const unreadable = fakeDisk({ '/data': Object.assign(new Error('gone'), { code: 'ENOENT' }) });
  const guard = await createDiskGuard({ dirs: ['/data'], minFreeBytes: 1, statfs: unreadable.statfs, service: 'test', log: () => assert.fail('nothing to say') });
  t.after(() => guard.close());
  assert.equal(guard.paused(), false);
  assert.deepEqual(unreadable.reads, ['/data']);
});
