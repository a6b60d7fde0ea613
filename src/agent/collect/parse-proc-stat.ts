/** Cumulative CPU time of one CPU line of /proc/stat, in USER_HZ ticks. */
export interface CpuTimes {
  /** idle + iowait: time the CPU had nothing to run. */
  idle: number;
  /** Every accounted state except guest/guest_nice, which the kernel already counts inside user/nice. */
  total: number;
  /** Ticks per mode, as the kernel splits them. */
  modes: Record<CpuMode, number>;
}

export const CPU_MODES = ['user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq', 'steal'] as const;
export type CpuMode = (typeof CPU_MODES)[number];

/** The machine-wide counters of /proc/stat besides CPU time. */
export interface StatCounters {
  /** Epoch seconds the machine booted (`btime`). */
  bootTime?: number;
  /** Processes and threads created since boot (`processes`): a counter of forks. */
  forks?: number;
  /** Context switches since boot (`ctxt`). */
  contextSwitches?: number;
  /** Interrupts serviced since boot (first number of `intr`). */
  interrupts?: number;
  /** Runnable now (`procs_running`). */
  running?: number;
  /** Blocked on I/O now (`procs_blocked`). */
  blocked?: number;
}

export interface ProcStat {
  overall: CpuTimes;
  /** Keyed by CPU number (`cpu3` -> 3); offline CPUs are absent from /proc/stat. */
  cores: Map<number, CpuTimes>;
  counters: StatCounters;
}

const COUNTER_LINES: Record<string, keyof StatCounters> = {
  btime: 'bootTime', processes: 'forks', ctxt: 'contextSwitches', intr: 'interrupts', procs_running: 'running', procs_blocked: 'blocked',
};

/**
 * Parses /proc/stat. Kernels before 2.6.33 print fewer CPU columns; missing
 * ones count as 0 rather than failing the whole report. The other counters
 * are present since 2.6 and simply absent from the result when missing.
 */
export function parseProcStat(text: string): ProcStat {
  let overall: CpuTimes | undefined;
  const cores = new Map<number, CpuTimes>();
  const counters: StatCounters = {};
  for (const line of text.split('\n')) {
    const m = /^cpu(\d*)\s+(.*)$/.exec(line);
    if (!m) {
      const [key, value] = line.split(/\s+/, 2);
      const field = key ? COUNTER_LINES[key] : undefined;
      if (field && value !== undefined && Number.isFinite(Number(value))) counters[field] = Number(value);
      continue;
    }
    const v = m[2]!.trim().split(/\s+/).map(Number);
    const modes = Object.fromEntries(CPU_MODES.map((mode, i) => [mode, Number.isFinite(v[i]) ? v[i]! : 0])) as Record<CpuMode, number>;
    const times = { idle: modes.idle + modes.iowait, total: CPU_MODES.reduce((s, mode) => s + modes[mode], 0), modes };
    if (m[1] === '') overall = times;
    else cores.set(Number(m[1]), times);
  }
  if (!overall) throw new Error('/proc/stat has no aggregate "cpu" line');
  return { overall, cores, counters };
}

/** Busy percentage (0..100) between two samples; 0 when no time elapsed or the counters went backwards. */
export function cpuPercent(prev: CpuTimes, next: CpuTimes): number {
  const total = next.total - prev.total;
  const idle = next.idle - prev.idle;
  if (total <= 0 || idle < 0) return 0;
  return round2(Math.min(100, Math.max(0, (100 * (total - idle)) / total)));
}

/**
 * Overall and per-core busy percentages. `perCore[n]` is CPU n (the `cpuN` of /proc/stat), never the n-th line: with
 * a CPU offline the ones after it keep their metric names. The report's array cannot skip an index, so a CPU without
 * two readings (offline, or just brought online) below the highest one with them reads 0: it ran nothing here.
 */
export function cpuUsage(prev: ProcStat, next: ProcStat): { usage: number; perCore: number[] } {
  const both = [...next.cores.keys()].filter((id) => prev.cores.has(id));
  const perCore = Array.from({ length: both.length ? Math.max(...both) + 1 : 0 }, (_, id) => {
    const before = prev.cores.get(id);
    const after = next.cores.get(id);
    return before && after ? cpuPercent(before, after) : 0;
  });
  return { usage: cpuPercent(prev.overall, next.overall), perCore };
}

/**
 * USER_HZ: the unit of /proc/stat CPU times. Fixed at 100 on every Linux
 * architecture the agent runs on (the kernel exports it as such regardless of
 * CONFIG_HZ), which is why node_exporter hard-codes it too.
 */
export const USER_HZ = 100;

/** CPU time per mode in seconds (counters since boot). */
export function cpuSeconds(t: CpuTimes): Record<CpuMode, number> {
  return Object.fromEntries(CPU_MODES.map((mode) => [mode, round2(t.modes[mode] / USER_HZ)])) as Record<CpuMode, number>;
}

export function round2(n: number): number {
  return Math.round(n * 100) / 100;
}
