import type { Alert } from '../metrics/alerts/alert.js';
import type { DiskReport } from './collect/disk-usage.js';
import type { InterfaceReport } from './collect/network-rates.js';
import type { DiskIo } from './collect/parse-diskstats.js';
import type { Memory } from './collect/parse-meminfo.js';
import type { Pressure } from './collect/parse-pressure.js';
import type { CpuMode } from './collect/parse-proc-stat.js';

/** One configured systemd unit in a report. */
export interface ServiceReport {
  name: string;
  /** `systemctl is-active` output (active, inactive, failed, activating, ...) or "unknown"; text, so not stored. */
  status: string;
  /** 1 when status is "active", else 0: the numeric form, stored by the service as `service.<name>.active`. */
  active: number;
}

/**
 * The body the agent sends (one NDJSON line of a bulk request). Sizes are
 * bytes, percentages 0..100, times seconds, `ts` epoch ms. Counters are the
 * kernel's cumulative values since boot; docs/host-agent.md lists every
 * metric name this becomes and whether it is a counter or a gauge.
 */
export interface AgentReport {
  agentId: string;
  hostname: string;
  platform: string;
  ts: number;
  cpu: {
    usage: number;
    perCore: number[];
    loadAverage: [number, number, number];
    /** Online CPUs of the machine. */
    count: number;
    /** The agent's cgroup CPU quota in cores, when one is set (inside a limited container). */
    limitCores?: number;
    /** CPU time per mode, all cores together (counters). */
    seconds: Record<CpuMode, number>;
    /** With --per-core-cpu-modes: CPU time per mode of each core (counters). */
    cores?: Record<string, { seconds: Record<CpuMode, number> }>;
  };
  memory: Memory;
  disks: DiskReport[];
  /** Per whole block device (partitions, loop and RAM disks excluded): I/O counters. */
  diskio?: Record<string, DiskIo>;
  /** Per interface (loopback and veth excluded): counters since boot and per-second rates over the last interval. */
  network: Record<string, InterfaceReport>;
  system: {
    uptimeSeconds?: number;
    bootTime?: number;
    processes: { running?: number; blocked?: number; forks?: number };
    contextSwitches?: number;
    interrupts?: number;
    fds?: { allocated: number; max: number };
    sockets?: Record<string, number | Record<string, number>>;
  };
  /** Pressure stall information per resource (kernel 4.20+). */
  pressure?: Record<string, Pressure>;
  /** Temperatures in degrees Celsius, per hwmon chip and sensor. */
  sensors?: Record<string, Record<string, number>>;
  services: ServiceReport[];
  alerts: Alert[];
}
