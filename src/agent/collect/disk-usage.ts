import { round2 } from './parse-proc-stat.js';

/** The subset of `fs.StatFs` the agent needs (block counts and block size). */
export interface StatfsResult {
  bsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  /** Inodes in total and free; 0 on filesystems without a fixed inode table (btrfs, some network filesystems). */
  files?: number;
  ffree?: number;
}

/** Disk figures in bytes. */
export interface DiskReport {
  path: string;
  total: number;
  /** total - free blocks. */
  used: number;
  /** Free space an unprivileged user may use (excludes blocks reserved for root). */
  available: number;
  /** used / (used + available) * 100, as df(1) computes it, so a disk whose reserve is all that is left reads 100. */
  percent: number;
  /** Inodes, when the filesystem has a fixed number of them. */
  inodesTotal?: number;
  inodesUsed?: number;
  inodesFree?: number;
  inodesPercent?: number;
}

/** Turns statfs block counts into bytes; `undefined` for a filesystem with no blocks (nothing to report). */
export function diskUsage(path: string, s: StatfsResult): DiskReport | undefined {
  if (s.blocks <= 0 || s.bsize <= 0) return undefined;
  const total = s.blocks * s.bsize;
  const used = (s.blocks - s.bfree) * s.bsize;
  const available = s.bavail * s.bsize;
  const percent = used + available > 0 ? round2((100 * used) / (used + available)) : 0;
  const d: DiskReport = { path, total, used, available, percent };
  if (s.files !== undefined && s.ffree !== undefined && s.files > 0) {
    d.inodesTotal = s.files;
    d.inodesFree = Math.min(s.ffree, s.files);
    d.inodesUsed = s.files - d.inodesFree;
    d.inodesPercent = round2((100 * d.inodesUsed) / s.files);
  }
  return d;
}
