/** Display formatting for the dashboard; `now` is passed in so output is deterministic under test. */

/** "just now", "42 s ago", "5 min ago", "3 h ago", "2 d ago"; a ts ahead of the server clock reads "in 30 s". */
export function formatRelative(ts: number, now: number): string {
  const diff = now - ts;
  const abs = Math.abs(diff);
  if (abs < 5_000) return 'just now';
  const amount =
    abs < 60_000 ? `${Math.floor(abs / 1_000)} s`
    : abs < 3_600_000 ? `${Math.floor(abs / 60_000)} min`
    : abs < 86_400_000 ? `${Math.floor(abs / 3_600_000)} h`
    : `${Math.floor(abs / 86_400_000)} d`;
  return diff >= 0 ? `${amount} ago` : `in ${amount}`;
}

/** `2026-11-21 23:18:00 UTC`: one unambiguous zone for every viewer of a shared fleet page. */
export function formatAbsolute(ts: number): string {
  return `${new Date(ts).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** One decimal and a percent sign; an absent value is an em dash. */
export function formatPercent(value: number | null): string {
  return value === null ? '—' : `${value.toFixed(1)} %`;
}
