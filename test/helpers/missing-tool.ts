import { appendFileSync } from 'node:fs';

/**
 * What the suite does when a tool it drives is missing. Under CI=true (and
 * .ci/run) a missing tool fails the run: a skipped suite must never pass for
 * a green one. Elsewhere the tests that need it are skipped, and the reason
 * (the tool, what is skipped, how to install it) goes to the file the test
 * runner named in FLEETSYNC_SKIP_LOG, which it prints in its closing summary.
 */
export interface MissingTool {
  /** The missing program or service, e.g. "haproxy". */
  tool: string;
  /** What does not run without it. */
  skipped: string;
  /** How to get it, e.g. "apt-get install haproxy". */
  install: string;
}

export function ciRequiresEverything(): boolean {
  return process.env['CI'] === 'true' || process.env['CI'] === '1';
}

/** Returns the skip reason for `node:test` (`false` when nothing is missing); throws under CI. */
export function skipUnless(missing: MissingTool[]): string | false {
  if (!missing.length) return false;
  const reason = missing.map((m) => `${m.tool} missing (${m.install})`).join('; ');
  if (ciRequiresEverything()) throw new Error(`CI=true: ${reason}; needed by: ${missing[0]!.skipped}`);
  const log = process.env['FLEETSYNC_SKIP_LOG'];
  if (log) for (const m of missing) appendFileSync(log, `${JSON.stringify(m)}\n`);
  return reason;
}
