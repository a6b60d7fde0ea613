import { flattenReport } from '../metrics/domain/flatten.js';
import type { AgentReport } from './agent-report.js';
import { evaluateRules, type CompiledRule } from './alerts/threshold-alerts.js';
import type { Collector } from './collect/collector.js';

/** Collects a report and adds the local alerts that fire on it. */
export function reportBuilder(collector: Collector, rules: CompiledRule[]): (now: number) => Promise<AgentReport> {
  return async (now) => {
    const r: AgentReport = { ...(await collector.collect(now)), alerts: [] };
    // The service's own flattening names the metrics, so a rule names a metric exactly as a series query does.
    r.alerts = evaluateRules(rules, flattenReport(r));
    return r;
  };
}
