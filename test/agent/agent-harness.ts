import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../src/agent/logger.js';

export interface LogLine { level: string; msg: string; [field: string]: unknown }

/** A logger that keeps every line, so tests can read what the agent did (and in which order). */
export function captureLog(): { log: Logger; lines: LogLine[]; find(msg: string): LogLine[] } {
  const lines: LogLine[] = [];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => { lines.push({ ...fields, level, msg }); };
  return {
    log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    lines,
    find: (msg) => lines.filter((l) => l.msg === msg),
  };
}

/** Polls `cond` until true; fails with `what` after a generous deadline (a hang, not a slow machine). */
export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, deadlineMs = 30_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function tempDir(prefix = 'agent-test-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}
