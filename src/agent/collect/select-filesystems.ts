import type { MountEntry } from './parse-mountinfo.js';

/** Kernel and virtual filesystems that hold no user data (node_exporter's and Telegraf's lists, merged). */
const PSEUDO = new Set([
  'proc', 'sysfs', 'devtmpfs', 'devpts', 'tmpfs', 'ramfs', 'cgroup', 'cgroup2', 'pstore', 'bpf', 'tracefs', 'debugfs',
  'securityfs', 'selinuxfs', 'mqueue', 'hugetlbfs', 'configfs', 'fusectl', 'autofs', 'binfmt_misc', 'rpc_pipefs',
  'nsfs', 'efivarfs', 'squashfs', 'erofs', 'iso9660', 'udf', 'aufs', 'overlay', 'devfs', 'nfsd', 'zram',
]);

/**
 * Network filesystems are skipped: statfs on a mount whose server is gone
 * blocks a libuv thread indefinitely, which would stall the spool's disk writes.
 */
const NETWORK = new Set(['nfs', 'nfs4', 'cifs', 'smb3', 'smbfs', 'ceph', 'glusterfs', 'lustre', '9p', 'afs', 'ncpfs', 'davfs']);

function isRealFilesystem(m: MountEntry): boolean {
  // overlay is a container's root: reported there (the agent runs in a container), skipped elsewhere (on a host,
  // each container's overlay mirrors the disk that is already reported).
  if (m.fsType === 'overlay') return m.mountPoint === '/';
  if (PSEUDO.has(m.fsType) || NETWORK.has(m.fsType)) return false;
  // FUSE filesystems are user-space views (sshfs, lxcfs, gvfs); fuseblk is a real block device (ntfs-3g, exfat).
  if (m.fsType.startsWith('fuse') && m.fsType !== 'fuseblk') return false;
  return true;
}

/** Mounts that may be bind mounts of a single file (Docker's /etc/hosts): the caller checks these with stat. */
export function bindMountCandidates(mounts: MountEntry[]): MountEntry[] {
  return mounts.filter((m) => m.root !== '/' && isRealFilesystem(m));
}

/**
 * The mounts worth a statfs: real filesystems only, each device once, and
 * only the top mount of a mount point (one mounted over hides those below). When a
 * device is mounted several times (bind mounts, Docker volumes), the mount of the
 * filesystem's own root wins over subdirectory binds, then the shortest mount
 * point. Bind mounts of single files (`fileMounts`) are never chosen. Result
 * ordered by mount point.
 */
export function selectFilesystems(mounts: MountEntry[], fileMounts: ReadonlySet<string> = new Set()): MountEntry[] {
  // A mount over another at the same point hides it (mountinfo lists mounts in the order they were made): only the
  // top one is what a statfs of that path sees, and two at one path would report one path twice.
  const top = new Map<string, MountEntry>();
  for (const m of mounts) top.set(m.mountPoint, m);
  const byDevice = new Map<string, MountEntry>();
  for (const m of mounts) {
    if (top.get(m.mountPoint) !== m || !isRealFilesystem(m) || fileMounts.has(m.mountPoint)) continue;
    const seen = byDevice.get(m.device);
    if (!seen || better(m, seen)) byDevice.set(m.device, m);
  }
  return [...byDevice.values()].sort((a, b) => (a.mountPoint < b.mountPoint ? -1 : a.mountPoint > b.mountPoint ? 1 : 0));
}

function better(a: MountEntry, b: MountEntry): boolean {
  if ((a.root === '/') !== (b.root === '/')) return a.root === '/';
  return a.mountPoint.length < b.mountPoint.length;
}
