/**
 * The one shape of an operator-facing CLI error, for every program of the
 * repository: `program: what is wrong (see program --help)`, on one line,
 * never a stack trace. Usage errors exit 2 (sysexits EX_USAGE style).
 */
export const EXIT_USAGE = 2;

export function usageError(program: string, problems: string[], helpCommand = `${program} --help`): string {
  return `${program}: ${problems.join('; ')} (see ${helpCommand})`;
}

/** The message for a listen address that is taken, naming the option that picks another. */
export function portInUseMessage(program: string, address: string, option: string, what = 'is it already running?'): string {
  return `${program}: ${address} is in use: ${what} ${option} chooses another`;
}

/** Whether `e` is a listen failure on a port another process holds. */
export function isAddressInUse(e: unknown): e is NodeJS.ErrnoException & { address?: string; port?: number } {
  return typeof e === 'object' && e !== null && (e as NodeJS.ErrnoException).code === 'EADDRINUSE';
}
