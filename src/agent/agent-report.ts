import type { Alert } from '../metrics/alerts/alert.js';
import type { DiskReport } from './collect/disk-usage.js';
import type { InterfaceReport } from './collect/network-rates.js';
import type { Memory } from './collect/parse-meminfo.js';

/** One configured systemd unit in a report. */
export interface ServiceReport {
  name: string;
  /** `systemctl is-active` output (active, inactive, failed, activating, ...) or "unknown"; text, so not stored. */
  status: string;
  /** 1 when status is "active", else 0: the numeric form, stored by the service as `service.<name>.active`. */
  active: number;
}

/** The body the agent POSTs to /api/v1/ingest. Sizes are bytes, percentages 0..100, `ts` epoch ms. */
export interface AgentReport {
  agentId: string;
  hostname: string;
  platform: string;
  ts: number;
  cpu: { usage: number; perCore: number[]; loadAverage: [number, number, number] };
  memory: Memory;
  disks: DiskReport[];
  /** Per interface (loopback and veth excluded): counters since boot and per-second rates over the last interval. */
  network: Record<string, InterfaceReport>;
  services: ServiceReport[];
  alerts: Alert[];
}
