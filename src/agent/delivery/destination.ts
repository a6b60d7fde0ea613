import { createHash } from 'node:crypto';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { makeDir } from '../../core/make-dir.js';

/**
 * A spool belongs to one destination: the service URL and the token together.
 * Reports spooled for one are never sent to another, so an agent restarted
 * with another URL or token (or a second agent sharing the state directory)
 * cannot deliver a report into the wrong service or tenant.
 */
export function destinationKey(url: string, token: string): string {
  const normalized = new URL(url.endsWith('/') ? url : `${url}/`).href;
  return createHash('sha256').update(`${normalized}\n${token}`).digest('hex').slice(0, 24);
}

/**
 * `<stateDir>/spool-<key>`, created, with a `destination.json` naming the URL
 * (never the token) so an operator can tell the spools apart. A label that
 * cannot be written (the disk full) goes to `onLabelError` rather than stopping
 * the start: the agent matters most on such a host, and the next start writes it.
 */
export async function destinationSpoolDir(stateDir: string, url: string, token: string, onLabelError?: (e: unknown) => void): Promise<string> {
  const dir = path.join(stateDir, `spool-${destinationKey(url, token)}`);
  makeDir(dir, 0o700, 'the spool directory');
  const label = path.join(dir, 'destination.json');
  const want = `${JSON.stringify({ url })}\n`;
  if ((await readFile(label, 'utf8').catch(() => '')) !== want) {
    try {
      await writeFile(label, want, { mode: 0o600 });
    } catch (e: unknown) {
      if (!onLabelError) throw e;
      // A label cut short reads as damaged; none at all reads the same and takes no space.
      await rm(label, { force: true }).catch(() => undefined);
      onLabelError(e);
    }
  }
  return dir;
}

/** The other destinations' spools in `stateDir`: those of a URL or token no longer used, or of another agent sharing it. */
export async function otherSpoolDirs(stateDir: string, current: string): Promise<string[]> {
  const entries = await readdir(stateDir, { withFileTypes: true });
  return entries.filter((e) => e.isDirectory() && /^spool-[0-9a-f]{24}$/.test(e.name)).map((e) => path.join(stateDir, e.name)).filter((d) => d !== current);
}

/** The URL a spool's `destination.json` names, or undefined when it is missing or damaged. */
export async function destinationUrl(dir: string): Promise<string | undefined> {
  try {
    const { url } = JSON.parse(await readFile(path.join(dir, 'destination.json'), 'utf8')) as { url?: unknown };
    return typeof url === 'string' ? url : undefined;
  } catch {
    return undefined;
  }
}
