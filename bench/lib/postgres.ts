// Why: benchmarks on PostgreSQL report the database's own CPU, which the service's process figures leave out.
import { readdirSync, readFileSync } from 'node:fs';

/** CPU seconds so far of the PostgreSQL backends serving database `db` (process title `postgres: user db ...`), from /proc. */
export function pgCpu(db: string): number {
  const tick = 100;
  let total = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.startsWith('postgres: ') || !cmd.split(' ').includes(db)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) / tick;
    } catch { /* gone */ }
  }
  return total;
}
