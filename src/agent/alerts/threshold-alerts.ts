import type { Alert } from '../../metrics/alerts/alert.js';
import { AGENT_ALERT_LIMITS as ALERT_LIMITS } from './alert-limits.js';
import type { AlertRule } from '../agent-config-file.js';

/** `*` matches any run of characters (dots and slashes included, so `disk.*.percent` covers every mount). */
export function metricPattern(glob: string): RegExp {
  return new RegExp(`^${glob.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, '\\$&')).join('.*')}$`);
}

export interface CompiledRule extends AlertRule { re: RegExp }

export function compileRules(rules: AlertRule[]): CompiledRule[] {
  return rules.map((r) => ({ ...r, re: metricPattern(r.metric) }));
}

function crossed(rule: AlertRule, value: number): number | undefined {
  if (rule.above !== undefined && value > rule.above) return rule.above;
  if (rule.below !== undefined && value < rule.below) return rule.below;
  return undefined;
}

/**
 * The alerts firing in this report: one per (rule, matching metric) whose value
 * is past the rule's threshold. Like a Prometheus rule, an alert is carried in
 * every report while its condition holds and simply stops appearing once it
 * clears. At most the service's per-report limit, in rule order.
 */
export function evaluateRules(rules: CompiledRule[], metrics: ReadonlyMap<string, number>): Alert[] {
  const out: Alert[] = [];
  for (const rule of rules) {
    for (const [metric, value] of metrics) {
      if (!rule.re.test(metric)) continue;
      const threshold = crossed(rule, value);
      if (threshold === undefined) continue;
      if (out.length === ALERT_LIMITS.maxAlerts) return out;
      const direction = rule.above !== undefined && value > rule.above ? 'above' : 'below';
      out.push({
        name: rule.name,
        severity: rule.severity,
        message: (rule.message ?? `${metric} is ${value}, ${direction} ${threshold}`).slice(0, ALERT_LIMITS.messageLength),
        labels: { metric: metric.slice(0, ALERT_LIMITS.labelValueLength) },
        value,
        threshold,
      });
    }
  }
  return out;
}
