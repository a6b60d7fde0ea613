// Why: code that runs without the service's logger (the storage set up under it, writer threads) writes its rare lines in the logger's format, to the same stream.

/** One JSON line as the services' pino loggers write them: numeric level, ISO `time`, `service`, `msg`, to stdout. */
export function writeLogLine(level: 'info' | 'warn' | 'error', service: string | undefined, msg: string, err?: unknown): void {
  const line = {
    level: level === 'info' ? 30 : level === 'warn' ? 40 : 50,
    time: new Date().toISOString(),
    ...(service ? { service } : {}),
    msg,
    ...(err === undefined ? {} : { err: err instanceof Error ? err.message : String(err) }),
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}
