import { Type, type Static } from 'typebox';
import { AlertsSchema } from '../alerts/alert.js';
import { AGENT_ID_PATTERN, NAME_TEXT_PATTERN } from './report-text.js';

/**
 * The agent report, as published to agents (the host agent builds its
 * reports against this schema) and served in the OpenAPI document.
 *
 * Required: the identity (`agentId`, `hostname`, `platform`), `ts`, and the two
 * numbers every dashboard row needs (`cpu.usage`, `memory`). `disks`,
 * `network`, `services` and `alerts` are optional. Unknown fields anywhere are
 * tolerated (newer agents talking to older servers) but never stored.
 * Bytes are bytes, percentages are 0-100. Array bounds keep a hostile report
 * from costing more than its body limit already allows.
 */


const Bytes = Type.Number({ minimum: 0, description: 'Bytes.' });
const Percent = Type.Number({ minimum: 0, maximum: 100, description: 'Percent, 0-100.' });

export const CpuSchema = Type.Object({
  usage: Type.Number({ minimum: 0, maximum: 100, description: 'Busy share of all cores, percent.' }),
  perCore: Type.Optional(Type.Array(Type.Number({ minimum: 0, maximum: 100 }), { maxItems: 1024, description: 'Busy percent per core.' })),
  loadAverage: Type.Optional(Type.Array(Type.Number({ minimum: 0 }), { minItems: 3, maxItems: 3, description: '1, 5 and 15 minute load averages.' })),
}, { additionalProperties: true });

export const MemorySchema = Type.Object({
  total: Bytes,
  used: Bytes,
  free: Bytes,
  percent: Percent,
}, { additionalProperties: true });

export const DiskSchema = Type.Object({
  path: Type.String({ minLength: 1, maxLength: 256, pattern: NAME_TEXT_PATTERN, description: 'Mount point; names the metrics `disk.<path>.*`. No control or invisible characters.' }),
  total: Bytes,
  used: Bytes,
  available: Bytes,
  percent: Percent,
}, { additionalProperties: true });

export const ServiceSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 128, pattern: NAME_TEXT_PATTERN, description: 'Names the metrics `service.<name>.*`. No control or invisible characters.' }),
  status: Type.Optional(Type.String({ maxLength: 64, description: 'Free text (e.g. "active"); not stored.' })),
}, {
  additionalProperties: true,
  description: 'One supervised service. Every other numeric field (at any depth) becomes `service.<name>.<field>`, e.g. `service.nginx.restarts`.',
});

export const ReportSchema = Type.Object({
  agentId: Type.String({ pattern: AGENT_ID_PATTERN, description: 'Stable agent identifier; it is the host id. 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit, never "..".' }),
  hostname: Type.String({ minLength: 1, maxLength: 255, pattern: NAME_TEXT_PATTERN, description: 'Display name; the latest report wins. No control or invisible characters.' }),
  platform: Type.String({ minLength: 1, maxLength: 64, pattern: NAME_TEXT_PATTERN, description: 'Operating system family, e.g. "linux". No control or invisible characters.' }),
  // The maximum also refuses Infinity (a JSON 1e400), which the integer check alone lets through.
  ts: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Sample time, epoch milliseconds.' }),
  cpu: CpuSchema,
  memory: MemorySchema,
  disks: Type.Optional(Type.Array(DiskSchema, { maxItems: 256 })),
  network: Type.Optional(Type.Object({}, {
    additionalProperties: true,
    description: 'Free-form; every numeric leaf becomes `network.<key>[.<key>...]` (arrays use the index).',
  })),
  diskio: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `diskio.<device>.<field>` (block device I/O counters).' })),
  system: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `system.<key>[.<key>...]` (uptime, processes, file descriptors, sockets).' })),
  pressure: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `pressure.<resource>.<some|full>.<field>` (Linux PSI).' })),
  sensors: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `sensors.<chip>.<sensor>` (temperatures, degrees Celsius).' })),
  services: Type.Optional(Type.Array(ServiceSchema, { maxItems: 256 })),
  alerts: Type.Optional(AlertsSchema),
}, { additionalProperties: true });

export type Report = Static<typeof ReportSchema>;
