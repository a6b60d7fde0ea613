import type { HostSource } from './host-source.js';

/** A metric-name-safe key: lower case, runs of other characters become `_`. */
function key(s: string): string {
  return s.trim().toLowerCase().replace(/[^a-z0-9_-]+/g, '_').replace(/^_+|_+$/g, '') || 'unnamed';
}

/**
 * Temperatures from /sys/class/hwmon, in degrees Celsius: one entry per chip
 * (its `name`; a second chip of the same name gets `-2`, ordered by hwmon
 * number) and sensor (its `tempN_label`, else `tempN`). The kernel gives
 * millidegrees. A chip or sensor that cannot be read (a device asleep answers
 * EAGAIN or ENODATA) is left out of this report.
 */
export async function hwmonTemperatures(source: HostSource): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = {};
  const chips = (await source.listSys('class/hwmon')).filter((n) => /^hwmon\d+$/.test(n)).sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
  for (const chip of chips) {
    const dir = `class/hwmon/${chip}`;
    const files = await source.listSys(dir);
    const inputs = files.filter((f) => /^temp\d+_input$/.test(f)).sort((a, b) => parseInt(a.slice(4), 10) - parseInt(b.slice(4), 10));
    if (!inputs.length) continue;
    const sensors: Record<string, number> = {};
    for (const input of inputs) {
      const n = input.slice(0, -'_input'.length);
      try {
        const milli = Number((await source.readSys(`${dir}/${input}`)).trim());
        if (!Number.isFinite(milli)) continue;
        const label = files.includes(`${n}_label`) ? key(await source.readSys(`${dir}/${n}_label`).catch(() => n)) : n;
        sensors[label in sensors ? `${label}-${n}` : label] = Math.round(milli / 100) / 10;
      } catch { /* unreadable sensor: skipped this time */ }
    }
    if (!Object.keys(sensors).length) continue;
    const name = key(await source.readSys(`${dir}/name`).catch(() => chip));
    let chipKey = name;
    for (let i = 2; chipKey in out; i++) chipKey = `${name}-${i}`;
    out[chipKey] = sensors;
  }
  return out;
}
