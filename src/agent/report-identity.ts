// Why: the agent id and hostname go into every report, so a value the service's report schema refuses is caught at
// start (the same rules, from report-text.ts) instead of having every report refused and dropped.
import { AGENT_ID_PATTERN, isNameText } from '../metrics/domain/report-text.js';

const AGENT_ID = new RegExp(AGENT_ID_PATTERN);
/** The service's bound on `hostname`, in code points (as JSON Schema's maxLength counts). */
export const MAX_HOSTNAME_LENGTH = 255;

/** Why the service would refuse `id` as `agentId`, or undefined. */
export function agentIdProblem(id: string): string | undefined {
  return AGENT_ID.test(id) ? undefined : `"${id}" is not an agent id: 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit, never ".."`;
}

/** Why the service would refuse `name` as `hostname`, or undefined. */
export function hostnameProblem(name: string): string | undefined {
  const length = [...name].length;
  if (length === 0 || length > MAX_HOSTNAME_LENGTH) return `must be 1-${MAX_HOSTNAME_LENGTH} characters (is ${length})`;
  return isNameText(name) ? undefined : 'holds a control or invisible character';
}

/**
 * The system's hostname made acceptable to the service: control and invisible characters removed, at most 255
 * characters, "localhost" if nothing is left. The operator did not choose it, so it must not stop the agent.
 */
export function reportableHostname(system: string): string {
  return [...system].filter((ch) => isNameText(ch)).slice(0, MAX_HOSTNAME_LENGTH).join('') || 'localhost';
}
