/** What `systemctl is-active` printed for one unit: active, inactive, failed, activating, deactivating, reloading; or unknown. */
export interface ServiceState {
  name: string;
  state: string;
}

/** A unit name as systemd accepts it; anything else never reaches the command line. */
const UNIT_NAME = /^[A-Za-z0-9:_.\\@-]{1,128}$/;

export function isValidUnitName(name: string): boolean {
  return UNIT_NAME.test(name) && !name.startsWith('-');
}

/**
 * Interprets `systemctl is-active a b c` output: one state per line, in the
 * order asked. The command exits non-zero whenever a unit is not active, so
 * the exit status says nothing; a missing line means the state is unknown.
 */
export function parseIsActive(names: string[], stdout: string): ServiceState[] {
  const lines = stdout.split('\n').map((l) => l.trim());
  return names.map((name, i) => ({ name, state: lines[i] || 'unknown' }));
}

/**
 * Asks systemd for the state of `names` in one `systemctl is-active` call,
 * bounded by `timeoutMs` (a wedged systemd must not stall collection). On a
 * host without systemd, or on timeout, every state is "unknown".
 */
export function systemdServiceStates(names: string[], timeoutMs: number): Promise<ServiceState[]> {
  if (!names.length) return Promise.resolve([]);
  // Loaded only when units are watched: child_process (with dgram and the process bindings) is memory an agent
  // without services need not spend.
  const { execFile } = process.getBuiltinModule('node:child_process');
  return new Promise((resolve) => {
    execFile('systemctl', ['is-active', '--', ...names], { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 }, (err, stdout) => {
      const timedOut = err !== null && (err as NodeJS.ErrnoException & { killed?: boolean }).killed === true;
      resolve(parseIsActive(names, timedOut || typeof stdout !== 'string' ? '' : stdout));
    });
  });
}
