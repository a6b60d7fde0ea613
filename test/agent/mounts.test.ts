import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseMountinfo, unescapeMountPath } from '../../src/agent/collect/parse-mountinfo.js';
import { bindMountCandidates, selectFilesystems } from '../../src/agent/collect/select-filesystems.js';
import { fixture } from './fixtures.js';

test('mount paths have their octal escapes decoded (space, tab, backslash)', () => {
  assert.equal(unescapeMountPath('/mnt/backup\\040disk'), '/mnt/backup disk');
  assert.equal(unescapeMountPath('/media/usb\\011tab\\134back'), '/media/usb\ttab\\back');
});

test('parses mountinfo whatever the number of optional fields, skipping garbage lines', () => {
  const mounts = parseMountinfo(fixture('mountinfo-host.txt'));
  assert.equal(mounts.length, 19);
  const root = mounts.find((m) => m.mountPoint === '/');
  assert.deepEqual(root, { device: '259:2', root: '/', mountPoint: '/', fsType: 'ext4', source: '/dev/nvme0n1p2' });
  const overlay = mounts.find((m) => m.fsType === 'overlay');
  assert.equal(overlay?.mountPoint, '/var/lib/docker/overlay2/3f1c/merged', 'no optional fields before the separator');
});

test('on a host: pseudo, network, FUSE, snap and container overlay mounts are skipped, each device counted once', () => {
  const picked = selectFilesystems(parseMountinfo(fixture('mountinfo-host.txt')));
  assert.deepEqual(picked.map((m) => m.mountPoint), ['/', '/boot/efi', '/media/usb\ttab\\back', '/mnt/backup disk']);
});

test('a bind mount of a subdirectory never hides the mount of the filesystem itself', () => {
  const picked = selectFilesystems(parseMountinfo(fixture('mountinfo-host.txt')));
  // /dev/sdb1 is mounted at /srv/exports (a subdirectory, shorter path), /mnt/backup disk and /mnt/backup-again.
  assert.equal(picked.find((m) => m.device === '8:17')?.mountPoint, '/mnt/backup disk');
  assert.equal(picked.find((m) => m.device === '259:2')?.mountPoint, '/');
});

test('in a container: the overlay root is reported, and a volume rather than bind-mounted files', () => {
  const mounts = parseMountinfo(fixture('mountinfo-container.txt'));
  const candidates = bindMountCandidates(mounts).map((m) => m.mountPoint);
  assert.deepEqual(candidates, ['/var/lib/postgresql/data', '/etc/resolv.conf', '/etc/hostname', '/etc/hosts']);
  const files = new Set(['/etc/resolv.conf', '/etc/hostname', '/etc/hosts']);
  const picked = selectFilesystems(mounts, files);
  assert.deepEqual(picked.map((m) => [m.mountPoint, m.fsType]), [['/', 'overlay'], ['/var/lib/postgresql/data', 'ext4']]);
});
