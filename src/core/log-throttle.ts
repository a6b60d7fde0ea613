// Why: a fault that fails every request or every pass (a full disk) would write a line each time; the operator needs the first and a count.

/** The most distinct keys remembered; past it the oldest is forgotten (its next line is written as a first one). */
const MAX_KEYS = 100;

/**
 * Lets the first event of a kind through, then at most one per `intervalMs`, telling how many were held back since the
 * last line. `undefined` means: write nothing this time.
 */
export function createLogThrottle(intervalMs: number, now: () => number = Date.now): (key: string) => { held: number } | undefined {
  const seen = new Map<string, { at: number; held: number }>();
  return (key) => {
    const t = now();
    const entry = seen.get(key);
    if (entry && t - entry.at < intervalMs) {
      entry.held++;
      return undefined;
    }
    const held = entry?.held ?? 0;
    seen.delete(key);
    if (seen.size >= MAX_KEYS) seen.delete(seen.keys().next().value!);
    seen.set(key, { at: t, held: 0 });
    return { held };
  };
}

/** `msg`, with how many like lines were held back before it. */
export function withHeld(msg: string, held: number): string {
  return held ? `${msg} (${held} more since the last such line)` : msg;
}
