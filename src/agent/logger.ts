/** Structured log sink of the agent. The CLI writes JSON lines to stderr (journald keeps them); tests capture. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** One JSON object per line, with `level`, `time` (ISO) and `msg` first. */
export function jsonLogger(level: LogLevel, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const min = LOG_LEVELS.indexOf(level);
  const at = (lvl: Exclude<LogLevel, 'silent'>) => (msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(lvl) < min) return;
    write(`${JSON.stringify({ level: lvl, time: new Date().toISOString(), msg, ...fields })}\n`);
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
