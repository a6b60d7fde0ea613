import { readFile } from 'node:fs/promises';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';
import { SEVERITIES } from '../metrics/alerts/alert.js';
import { isValidUnitName } from './collect/systemd-services.js';

export const AlertRuleSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 128, description: 'Alert name sent to the service (alertname).' }),
  metric: Type.String({ minLength: 1, description: 'Metric name as the service stores it; `*` matches anything, e.g. "disk.*.percent".' }),
  above: Type.Optional(Type.Number({ description: 'Fires while the value is greater than this.' })),
  below: Type.Optional(Type.Number({ description: 'Fires while the value is less than this.' })),
  severity: Type.Enum([...SEVERITIES]),
  message: Type.Optional(Type.String({ maxLength: 1024, description: 'Fixed message; by default "<metric> is <value>, above <threshold>".' })),
}, { additionalProperties: false });

export type AlertRule = Static<typeof AlertRuleSchema>;

/** The `--config` file: systemd units to watch and local threshold rules. */
export const AgentConfigFileSchema = Type.Object({
  services: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 64 })),
  alerts: Type.Optional(Type.Array(AlertRuleSchema, { maxItems: 256 })),
}, { additionalProperties: false });

export interface AgentConfigFile {
  services: string[];
  alerts: AlertRule[];
}

/** Validates a parsed config file; throws one Error listing every problem. */
export function parseAgentConfigFile(value: unknown, origin = 'config'): AgentConfigFile {
  if (!Value.Check(AgentConfigFileSchema, value)) {
    const problems = [...Value.Errors(AgentConfigFileSchema, value)].map((e) => `${e.instancePath || '/'} ${e.message}`);
    throw new Error(`${origin}: ${[...new Set(problems)].join('; ')}`);
  }
  const problems: string[] = [];
  const services = value.services ?? [];
  for (const s of services) if (!isValidUnitName(s)) problems.push(`/services: "${s}" is not a systemd unit name`);
  const alerts = value.alerts ?? [];
  alerts.forEach((r, i) => {
    if ((r.above === undefined) === (r.below === undefined)) problems.push(`/alerts/${i} needs exactly one of "above" or "below"`);
  });
  if (problems.length) throw new Error(`${origin}: ${problems.join('; ')}`);
  return { services, alerts };
}

export async function loadAgentConfigFile(file: string): Promise<AgentConfigFile> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (e: unknown) {
    throw new Error(`${file}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  return parseAgentConfigFile(parsed, file);
}
