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

/**
 * A mount point as reported. A directory name may hold a tab or a newline,
 * but report names may not (docs/metrics-api.md, "Text in a report"), so
 * control characters stay in the kernel's own octal escape (`\011`, as in
 * /proc/self/mountinfo) and invisible format characters become `\u{...}`.
 */
function reportedPath(path: string): string {
  return path.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => {
    const code = c.codePointAt(0)!;
    return code <= 0o377 ? `\\${code.toString(8).padStart(3, '0')}` : `\\u{${code.toString(16)}}`;
  });
}

/** Length of the longest metric name a disk at `path` (as reported) gives: `disk.<path>.inodesPercent`. */
export function longestDiskMetricName(path: string): number {
  return 'disk.'.length + path.length + '.inodesPercent'.length;
}

/** Turns statfs block counts into bytes; `undefined` for a filesystem with no blocks (nothing to report). */
export function diskUsage(path: string, s: StatfsResult): DiskReport | undefined {
  if (s.blocks <= 0 || s.bsize <= 0) return undefined;
  const total = s.blocks * s.bsize;
  const used = (s.blocks - s.bfree) * s.bsize;
  const available = s.bavail * s.bsize;
  const percent = used + available > 0 ? round2((100 * used) / (used + available)) : 0;
  const d: DiskReport = { path: reportedPath(path), total, used, available, percent };
  if (s.files !== undefined && s.ffree !== undefined && s.files > 0) {
    d.inodesTotal = s.files;
    d.inodesFree = Math.min(s.ffree, s.files);
    d.inodesUsed = s.files - d.inodesFree;
    d.inodesPercent = round2((100 * d.inodesUsed) / s.files);
  }
  return d;
}
