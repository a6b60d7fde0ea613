import { Type, type Static } from 'typebox';

/**
 * One alert carried in an agent report (`alerts[]`). The shape follows
 * Prometheus/Alertmanager: a name (becomes the `alertname` label), a severity
 * that routes can match on, a human message (becomes the `message`
 * annotation), free-form labels, and optionally the observed value and the
 * threshold it crossed. Every string and the label count are bounded so one
 * report cannot make the service send arbitrarily large webhooks. Unknown
 * extra fields are tolerated, like everywhere in a report, and not forwarded.
 */
export const ALERT_LIMITS = {
  /** Alerts in one report. */
  maxAlerts: 32,
  nameLength: 128,
  messageLength: 1024,
  /** Labels on one alert. */
  maxLabels: 32,
  labelNameLength: 64,
  labelValueLength: 256,
} as const;

export const SEVERITIES = ['critical', 'warning', 'info'] as const;
export type Severity = (typeof SEVERITIES)[number];

export const SeveritySchema = Type.Enum([...SEVERITIES], { description: 'How urgent the alert is; routes match on it.' });

/** Prometheus label-name rules, so receivers that feed Alertmanager-compatible tools accept them. */
const LABEL_NAME = `^[a-zA-Z_][a-zA-Z0-9_]{0,${ALERT_LIMITS.labelNameLength - 1}}$`;

export const AlertLabelsSchema = Type.Record(
  Type.String({ pattern: LABEL_NAME }),
  Type.String({ maxLength: ALERT_LIMITS.labelValueLength }),
  {
    maxProperties: ALERT_LIMITS.maxLabels,
    additionalProperties: false,
    description: `Extra labels (name matches ${LABEL_NAME}, value at most ${ALERT_LIMITS.labelValueLength} characters). ` +
      'The labels alertname, severity, tenant, host and hostname are set by the service and override agent labels of the same name.',
  },
);

export const AlertSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: ALERT_LIMITS.nameLength, description: 'Alert name, e.g. HighCpu; sent as the alertname label.' }),
    severity: SeveritySchema,
    message: Type.Optional(Type.String({ maxLength: ALERT_LIMITS.messageLength, description: 'Human-readable text; sent as the message annotation.' })),
    labels: Type.Optional(AlertLabelsSchema),
    value: Type.Optional(Type.Number({ description: 'Observed value that raised the alert; sent as the value annotation.' })),
    threshold: Type.Optional(Type.Number({ description: 'Threshold that was crossed; sent as the threshold annotation.' })),
  },
  { description: 'An alert raised by the agent, routed to webhooks by the service.' },
);

export type Alert = Static<typeof AlertSchema>;

/** The `alerts` field of a report. */
export const AlertsSchema = Type.Array(AlertSchema, { maxItems: ALERT_LIMITS.maxAlerts });
