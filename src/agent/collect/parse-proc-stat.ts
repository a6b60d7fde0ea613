/** Cumulative CPU time of one CPU line of /proc/stat, in USER_HZ ticks. */
export interface CpuTimes {
  /** idle + iowait: time the CPU had nothing to run. */
  idle: number;
  /** Every accounted state except guest/guest_nice, which the kernel already counts inside user/nice. */
  total: number;
}

export interface ProcStat {
  overall: CpuTimes;
  /** Keyed by CPU number (`cpu3` -> 3); offline CPUs are absent from /proc/stat. */
  cores: Map<number, CpuTimes>;
}

/**
 * Parses the `cpu` lines of /proc/stat. Kernels before 2.6.33 print fewer
 * columns; missing ones count as 0 rather than failing the whole report.
 */
export function parseProcStat(text: string): ProcStat {
  let overall: CpuTimes | undefined;
  const cores = new Map<number, CpuTimes>();
  for (const line of text.split('\n')) {
    const m = /^cpu(\d*)\s+(.*)$/.exec(line);
    if (!m) continue;
    const v = m[2]!.trim().split(/\s+/).map(Number);
    const at = (i: number) => (Number.isFinite(v[i]) ? v[i]! : 0);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = [0, 1, 2, 3, 4, 5, 6, 7].map(at) as [number, number, number, number, number, number, number, number];
    const times = { idle: idle + iowait, total: user + nice + system + idle + iowait + irq + softirq + steal };
    if (m[1] === '') overall = times;
    else cores.set(Number(m[1]), times);
  }
  if (!overall) throw new Error('/proc/stat has no aggregate "cpu" line');
  return { overall, cores };
}

/** Busy percentage (0..100) between two samples; 0 when no time elapsed or the counters went backwards. */
export function cpuPercent(prev: CpuTimes, next: CpuTimes): number {
  const total = next.total - prev.total;
  const idle = next.idle - prev.idle;
  if (total <= 0 || idle < 0) return 0;
  return round2(Math.min(100, Math.max(0, (100 * (total - idle)) / total)));
}

/** Overall and per-core busy percentages; per-core only for CPUs present in both samples, ordered by CPU number. */
export function cpuUsage(prev: ProcStat, next: ProcStat): { usage: number; perCore: number[] } {
  const perCore: number[] = [];
  for (const id of [...next.cores.keys()].sort((a, b) => a - b)) {
    const before = prev.cores.get(id);
    if (before) perCore.push(cpuPercent(before, next.cores.get(id)!));
  }
  return { usage: cpuPercent(prev.overall, next.overall), perCore };
}

export function round2(n: number): number {
  return Math.round(n * 100) / 100;
}
