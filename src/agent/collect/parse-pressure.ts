/** One line of a /proc/pressure file: share of wall time stalled (percent) over 10/60/300 s, and the total. */
export interface PressureLine {
  avg10: number;
  avg60: number;
  avg300: number;
  /** Total stall time since boot, seconds (the kernel counts microseconds): a counter. */
  totalSeconds: number;
}

export interface Pressure {
  /** Some task stalled on the resource. */
  some?: PressureLine;
  /** Every non-idle task stalled at once (memory and io; cpu since 5.13, where it reads 0 at the system level). */
  full?: PressureLine;
}

/** Parses /proc/pressure/{cpu,memory,io} (kernel 4.20+, CONFIG_PSI). Unreadable lines are skipped. */
export function parsePressure(text: string): Pressure {
  const out: Pressure = {};
  for (const line of text.split('\n')) {
    const m = /^(some|full)\s+avg10=([\d.]+)\s+avg60=([\d.]+)\s+avg300=([\d.]+)\s+total=(\d+)\s*$/.exec(line.trim());
    if (!m) continue;
    out[m[1] as 'some' | 'full'] = { avg10: Number(m[2]), avg60: Number(m[3]), avg300: Number(m[4]), totalSeconds: Number(m[5]) / 1e6 };
  }
  return out;
}
