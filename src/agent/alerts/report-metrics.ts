import type { AgentReport } from '../agent-report.js';

/**
 * The numeric metrics of a report under the names the metrics service stores
 * them (`cpu.usage`, `cpu.perCore.0`, `memory.percent`, `disk./var.percent`,
 * `network.eth0.rxBytesPerSec`, `service.nginx.service.active`), so a local
 * alert rule and a dashboard query name a metric the same way.
 */
export function reportMetrics(r: Omit<AgentReport, 'alerts'>): Map<string, number> {
  const out = new Map<string, number>();
  out.set('cpu.usage', r.cpu.usage);
  r.cpu.perCore.forEach((v, i) => out.set(`cpu.perCore.${i}`, v));
  r.cpu.loadAverage.forEach((v, i) => out.set(`cpu.loadAverage.${i}`, v));
  for (const [k, v] of Object.entries(r.memory)) out.set(`memory.${k}`, v);
  for (const d of r.disks) {
    out.set(`disk.${d.path}.total`, d.total);
    out.set(`disk.${d.path}.used`, d.used);
    out.set(`disk.${d.path}.available`, d.available);
    out.set(`disk.${d.path}.percent`, d.percent);
  }
  for (const [name, counters] of Object.entries(r.network)) {
    for (const [k, v] of Object.entries(counters)) out.set(`network.${name}.${k}`, v);
  }
  for (const s of r.services) out.set(`service.${s.name}.active`, s.active);
  return out;
}
