/** The agent's --config file (units to watch, local alert rules), read and checked at start, before anything runs. */
import { readFile } from 'node:fs/promises';
import type { Severity } from '../metrics/alerts/alert.js';
import { AGENT_ALERT_LIMITS, AGENT_SEVERITIES } from './alerts/alert-limits.js';
import { isValidUnitName } from './collect/systemd-services.js';

/** One local threshold rule of the `--config` file. */
export interface AlertRule {
  /** Alert name sent to the service (alertname). */
  name: string;
  /** Metric name as the service stores it; `*` matches anything, e.g. "disk.*.percent". */
  metric: string;
  /** Fires while the value is greater than this. */
  above?: number;
  /** Fires while the value is less than this. */
  below?: number;
  severity: Severity;
  /** Fixed message; by default "<metric> is <value>, above <threshold>". */
  message?: string;
}

/** The `--config` file: systemd units to watch and local threshold rules. */
export interface AgentConfigFile {
  services: string[];
  alerts: AlertRule[];
}

const RULE_KEYS = new Set(['name', 'metric', 'above', 'below', 'severity', 'message']);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isText = (v: unknown, max: number): v is string => typeof v === 'string' && v.length > 0 && v.length <= max;

function checkRule(r: unknown, at: string, problems: string[]): AlertRule | undefined {
  if (!isObject(r)) { problems.push(`${at} must be an object`); return undefined; }
  for (const k of Object.keys(r)) if (!RULE_KEYS.has(k)) problems.push(`${at}/${k} is not a rule field`);
  if (!isText(r['name'], AGENT_ALERT_LIMITS.nameLength)) problems.push(`${at}/name must be 1-${AGENT_ALERT_LIMITS.nameLength} characters`);
  if (!isText(r['metric'], 256)) problems.push(`${at}/metric must be 1-256 characters`);
  if (!AGENT_SEVERITIES.includes(r['severity'] as Severity)) problems.push(`${at}/severity must be one of ${AGENT_SEVERITIES.join(', ')}`);
  for (const k of ['above', 'below'] as const) {
    if (r[k] !== undefined && !(typeof r[k] === 'number' && Number.isFinite(r[k]))) problems.push(`${at}/${k} must be a number`);
  }
  if ((r['above'] === undefined) === (r['below'] === undefined)) problems.push(`${at} needs exactly one of "above" or "below"`);
  if (r['message'] !== undefined && !isText(r['message'], AGENT_ALERT_LIMITS.messageLength)) problems.push(`${at}/message must be 1-${AGENT_ALERT_LIMITS.messageLength} characters`);
  return r as unknown as AlertRule;
}

/**
 * Validates a parsed config file; throws one Error listing every problem.
 * Checked by hand rather than with a TypeBox schema: loading TypeBox would
 * add ~20 MB to an agent that aims to stay small.
 */
export function parseAgentConfigFile(value: unknown, origin = 'config'): AgentConfigFile {
  const problems: string[] = [];
  if (!isObject(value)) throw new Error(`${origin}: must be a JSON object`);
  for (const k of Object.keys(value)) if (k !== 'services' && k !== 'alerts') problems.push(`/${k} is not a config field (services, alerts)`);
  const services: string[] = [];
  if (value['services'] !== undefined) {
    if (!Array.isArray(value['services']) || value['services'].length > 64) problems.push('/services must be an array of at most 64 unit names');
    else for (const s of value['services'] as unknown[]) {
      // A unit named twice would put its metric in every report twice, which the service refuses.
      if (typeof s === 'string' && isValidUnitName(s)) {
        if (services.includes(s)) problems.push(`/services: ${JSON.stringify(s)} is named twice`);
        else services.push(s);
      } else problems.push(`/services: ${JSON.stringify(s)} is not a systemd unit name`);
    }
  }
  const alerts: AlertRule[] = [];
  if (value['alerts'] !== undefined) {
    if (!Array.isArray(value['alerts']) || value['alerts'].length > 256) problems.push('/alerts must be an array of at most 256 rules');
    else (value['alerts'] as unknown[]).forEach((r, i) => { const rule = checkRule(r, `/alerts/${i}`, problems); if (rule) alerts.push(rule); });
  }
  if (problems.length) throw new Error(`${origin}: ${problems.join('; ')}`);
  return { services, alerts };
}

export async function loadAgentConfigFile(file: string): Promise<AgentConfigFile> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (e: unknown) {
    // JSON.parse quotes the text it stopped in, line breaks and all: escaped, the error stays the one line the CLI prints.
    const why = [...(e instanceof Error ? e.message : String(e))].map((c) => (c < ' ' ? JSON.stringify(c).slice(1, -1) : c)).join('');
    throw new Error(`${file}: ${why}`, { cause: e });
  }
  return parseAgentConfigFile(parsed, file);
}
