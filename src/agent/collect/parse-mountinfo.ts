/** One line of /proc/self/mountinfo (see proc(5)). */
export interface MountEntry {
  /** `major:minor` of the filesystem's device; bind mounts of one filesystem share it. */
  device: string;
  /** Directory of the filesystem that is mounted here (`/` unless this is a bind mount of a subdirectory). */
  root: string;
  mountPoint: string;
  fsType: string;
  source: string;
}

/** The kernel escapes space, tab, newline and backslash in paths as octal (`\040`). */
export function unescapeMountPath(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * Parses /proc/self/mountinfo. Optional fields (`shared:1`, `master:2`...)
 * vary in number, so the fields after the `-` separator are located by it, not
 * by position. Malformed lines are skipped.
 */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(' ');
    const sep = f.indexOf('-', 6);
    if (f.length < 7 || sep === -1 || f.length < sep + 3) continue;
    out.push({
      device: f[2]!,
      root: unescapeMountPath(f[3]!),
      mountPoint: unescapeMountPath(f[4]!),
      fsType: f[sep + 1]!,
      source: unescapeMountPath(f[sep + 2]!),
    });
  }
  return out;
}
