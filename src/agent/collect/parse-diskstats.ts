/** Counters of one block device from /proc/diskstats (see the kernel's Documentation/admin-guide/iostats.rst). */
export interface DiskIo {
  reads: number;
  readBytes: number;
  readSeconds: number;
  writes: number;
  writeBytes: number;
  writeSeconds: number;
  /** I/Os in flight now: the only gauge of the line. */
  inProgress: number;
  /** Time the device had I/O in flight (its utilisation, as a counter). */
  ioSeconds: number;
  /** In-flight time weighted by queue depth: the queue time iostat's avgqu-sz is derived from. */
  queueSeconds: number;
  /** Kernel 4.18+. */
  discards?: number;
  discardBytes?: number;
  /** Kernel 5.5+. */
  flushes?: number;
}

/** diskstats counts 512-byte sectors whatever the device's sector size. */
const SECTOR = 512;

/**
 * Whole disks only: partitions (their I/O is already in the disk's), RAM
 * disks, loop devices and floppies are left out, as node_exporter's default
 * device filter does. Device-mapper (dm-N) and md arrays are kept: they are
 * what LVM and RAID users watch.
 */
export function isReportedBlockDevice(name: string): boolean {
  if (/^(ram|zram|loop|fd)\d+$/.test(name)) return false;
  if (/^(h|s|v|xv)d[a-z]+\d+$/.test(name)) return false;
  // A disk whose name ends in a digit names its partitions `<disk>p<N>` (the kernel's rule): nvme0n1p1, mmcblk0p1,
  // and as well md127p1, nbd0p1, rbd0p1, and zd0p1 (a ZFS volume, as on Proxmox hosts).
  if (/\dp\d+$/.test(name)) return false;
  return true;
}

/**
 * Parses /proc/diskstats: 14 fields up to 4.17, 18 from 4.18 (discards),
 * 20 from 5.5 (flushes). Lines with fewer than 14 fields (2.6 partitions
 * printed 7) are skipped.
 */
export function parseDiskstats(text: string): Map<string, DiskIo> {
  const out = new Map<string, DiskIo>();
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 14) continue;
    const name = f[2]!;
    const v = f.slice(3).map(Number);
    if (v.some((n) => !Number.isFinite(n)) || !isReportedBlockDevice(name)) continue;
    const d: DiskIo = {
      reads: v[0]!, readBytes: v[2]! * SECTOR, readSeconds: v[3]! / 1000,
      writes: v[4]!, writeBytes: v[6]! * SECTOR, writeSeconds: v[7]! / 1000,
      inProgress: v[8]!, ioSeconds: v[9]! / 1000, queueSeconds: v[10]! / 1000,
    };
    if (v.length >= 15) { d.discards = v[11]!; d.discardBytes = v[13]! * SECTOR; }
    if (v.length >= 17) d.flushes = v[15]!;
    out.set(name, d);
  }
  return out;
}
