import { round2 } from './parse-proc-stat.js';

/** Memory figures in bytes. */
export interface Memory {
  total: number;
  /** MemTotal - MemAvailable: what applications hold and the kernel cannot reclaim (page cache is not "used"). */
  used: number;
  /** MemFree: pages holding nothing at all (as `free(1)` prints it). */
  free: number;
  /** MemAvailable: what new work could obtain without swapping. */
  available: number;
  /** used / total * 100. */
  percent: number;
  /** Absent when the machine has no swap configured. */
  swap?: Swap;
}

/** Swap figures in bytes. */
export interface Swap {
  total: number;
  /** SwapTotal - SwapFree. */
  used: number;
  free: number;
  /** Swapped-out pages also still in memory (free to drop). */
  cached: number;
  percent: number;
}

/**
 * Parses /proc/meminfo (values in kB) into bytes. Kernels before 3.14 have no
 * MemAvailable; it is then estimated as MemFree + Buffers + Cached + SReclaimable,
 * the same fallback `free(1)` uses.
 */
export function parseMeminfo(text: string): Memory {
  const kb = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([\w()]+):\s+(\d+)(?:\s+kB)?\s*$/.exec(line);
    if (m) kb.set(m[1]!, Number(m[2]) * 1024);
  }
  const total = kb.get('MemTotal');
  const free = kb.get('MemFree');
  if (total === undefined || free === undefined || total <= 0) throw new Error('/proc/meminfo lacks MemTotal or MemFree');
  const available = Math.min(total, kb.get('MemAvailable') ?? free + (kb.get('Buffers') ?? 0) + (kb.get('Cached') ?? 0) + (kb.get('SReclaimable') ?? 0));
  const used = total - available;
  const memory: Memory = { total, used, free, available, percent: round2((100 * used) / total) };
  const swapTotal = kb.get('SwapTotal') ?? 0;
  if (swapTotal > 0) {
    const swapFree = Math.min(swapTotal, kb.get('SwapFree') ?? 0);
    memory.swap = { total: swapTotal, used: swapTotal - swapFree, free: swapFree, cached: kb.get('SwapCached') ?? 0, percent: round2((100 * (swapTotal - swapFree)) / swapTotal) };
  }
  return memory;
}
