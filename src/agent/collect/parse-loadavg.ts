/** The 1, 5 and 15 minute load averages from /proc/loadavg. */
export function parseLoadavg(text: string): [number, number, number] {
  const parts = text.trim().split(/\s+/).slice(0, 3).map(Number);
  if (parts.length !== 3 || parts.some((n) => !Number.isFinite(n))) throw new Error(`unreadable /proc/loadavg: "${text.trim()}"`);
  return parts as [number, number, number];
}
