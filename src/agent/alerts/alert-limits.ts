import type { Severity } from '../../metrics/alerts/alert.js';

/**
 * The service's alert bounds (`ALERT_LIMITS`, `SEVERITIES` in
 * src/metrics/alerts/alert.ts), restated here because importing that module
 * loads TypeBox, which alone would add ~20 MB to the agent's resident memory.
 * A test keeps the two equal.
 */
export const AGENT_ALERT_LIMITS = { maxAlerts: 32, nameLength: 128, messageLength: 1024, labelValueLength: 256 } as const;
export const AGENT_SEVERITIES: readonly Severity[] = ['critical', 'warning', 'info'];
