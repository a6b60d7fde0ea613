import { createHmac, randomUUID } from 'node:crypto';
import { open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { makeDir } from '../core/make-dir.js';

/**
 * This program's application id for machine-id(5)'s "application-specific
 * id": the raw machine id never leaves the host, yet every agent on the
 * machine (any spool, URL or token) derives the same agent id.
 */
const APP_ID = Buffer.from('8f3c1a5e0b7d4e2a9c6f1d3b5a7e9c01', 'hex');

/**
 * `sd_id128_get_machine_app_specific()`: HMAC-SHA256 keyed by the 128-bit
 * machine id over the application id, truncated to 128 bits and marked as a
 * version 4 UUID. Undefined when the text is not a machine id (32 hex digits,
 * not all zero).
 */
export function appSpecificMachineId(machineIdText: string): string | undefined {
  const hex = machineIdText.trim().toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(hex) || /^0+$/.test(hex)) return undefined;
  const b = createHmac('sha256', Buffer.from(hex, 'hex')).update(APP_ID).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * The agent id belongs to the machine: derived from /etc/machine-id (the
 * host's, in container mode) so that two agents on one machine, whatever
 * their spool or destination, report the same host. A machine without a
 * machine id (some minimal containers) gets a random UUID kept in
 * `<stateDir>/agent-id`, created on first start.
 */
export async function machineAgentId(machineIdFile: string, stateDir: string): Promise<string> {
  try {
    const id = appSpecificMachineId(await readFile(machineIdFile, 'utf8'));
    if (id) return id;
  } catch (e: unknown) {
    if (!['ENOENT', 'EACCES', 'ENOTDIR'].includes((e as NodeJS.ErrnoException).code ?? '')) throw e;
  }
  return persistentAgentId(stateDir);
}

/** The fallback: a random UUID created once and kept in `<dir>/agent-id`. */
export async function persistentAgentId(dir: string): Promise<string> {
  const file = path.join(dir, 'agent-id');
  try {
    const id = (await readFile(file, 'utf8')).trim();
    if (id) return id;
  } catch (e: unknown) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  makeDir(dir, 0o700, 'the agent\'s state directory (--spool-dir)');
  const id = randomUUID();
  const fh = await open(`${file}.tmp`, 'w', 0o600);
  try { await fh.writeFile(`${id}\n`); await fh.sync(); } finally { await fh.close(); }
  await rename(`${file}.tmp`, file);
  return id;
}
