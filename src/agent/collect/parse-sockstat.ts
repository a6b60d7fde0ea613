/**
 * Parses /proc/net/sockstat (and sockstat6): `PROTO: key value key value...`
 * into `{ proto: { key: value } }` with lower-case protocol names; `tw` is
 * renamed `timeWait` and TCP `mem` (pages) `memPages`, so the names say what
 * they count. Everything here is a gauge (sockets in use now).
 */
export function parseSockstat(text: string): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z0-9]+):\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    const words = m[2]!.split(/\s+/);
    const proto = m[1]!.toLowerCase();
    const fields: Record<string, number> = {};
    for (let i = 0; i + 1 < words.length; i += 2) {
      const value = Number(words[i + 1]);
      if (!Number.isFinite(value)) continue;
      const key = words[i]!;
      fields[key === 'tw' ? 'timeWait' : key === 'mem' ? 'memPages' : key] = value;
    }
    if (Object.keys(fields).length) out[proto] = { ...out[proto], ...fields };
  }
  return out;
}
