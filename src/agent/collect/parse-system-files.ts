/** Seconds since boot, the first number of /proc/uptime. */
export function parseUptime(text: string): number {
  const up = Number(text.trim().split(/\s+/)[0]);
  if (!Number.isFinite(up) || up < 0) throw new Error(`unreadable /proc/uptime: "${text.trim()}"`);
  return up;
}

/**
 * /proc/sys/fs/file-nr: allocated file handles, allocated-but-unused (always
 * 0 since 2.6), and the system-wide maximum.
 */
export function parseFileNr(text: string): { allocated: number; max: number } {
  const [allocated, unused, max] = text.trim().split(/\s+/).map(Number);
  if (![allocated, unused, max].every((n) => Number.isFinite(n))) throw new Error(`unreadable /proc/sys/fs/file-nr: "${text.trim()}"`);
  return { allocated: allocated! - unused!, max: max! };
}
