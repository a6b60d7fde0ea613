// Why: bulk writes stop while the disk under the data has less than a floor free, so the disk never fills and the storage
// keeps room to compact what it holds (VictoriaMetrics' -storage.minFreeDiskSpaceBytes); reads go on.
import { statfs } from 'node:fs/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { storageFullError } from './unavailable.js';
import { writeLogLine } from '../log-line.js';

export interface DiskGuard {
  /** Whether a watched directory has less than the floor free: writes are refused. */
  paused(): boolean;
  /** The last reading of each watched directory, for /metrics. */
  readings(): ReadonlyArray<{ dir: string; freeBytes: number }>;
  /**
   * An onRequest hook answering the 503 of a full disk while paused, before the body is read. Not async: no promise per
   * request on ingest.
   */
  readonly hook: (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void;
  close(): void;
}

export interface DiskGuardOptions {
  /** Directories whose filesystems are watched (the SQLite data directory, a local attachment directory). */
  dirs: string[];
  /** Bytes an unprivileged process may still write there, under which writes are refused; 0 turns the guard off. */
  minFreeBytes: number;
  /** Names the service in the lines the operator gets when a directory goes under the floor and back over it. */
  service: string;
  /** Where those lines go (default: stdout in the services' log format); tests replace it. */
  log?: (level: 'error' | 'info', msg: string, fields: { dir: string; freeBytes: number }) => void;
  /** How often free space is read (default 1 s). */
  intervalMs?: number;
  statfs?: (dir: string) => Promise<{ bavail: number | bigint; bsize: number | bigint }>;
}

/** Reads free space once (so a start on a nearly full disk refuses at once), then every `intervalMs`. */
export async function createDiskGuard(o: DiskGuardOptions): Promise<DiskGuard> {
  const read = o.statfs ?? statfs;
  const log = o.log ?? ((level, msg, { dir, freeBytes }) => writeLogLine(level, o.service, `${msg} (${dir}: ${freeBytes} bytes free)`));
  const low = new Set<string>();
  const frees = new Map<string, number>();
  const dirs = o.minFreeBytes > 0 ? [...new Set(o.dirs)] : [];
  const poll = async (): Promise<void> => {
    for (const dir of dirs) {
      let free: number;
      try {
        const s = await read(dir);
        free = Number(s.bavail) * Number(s.bsize);
      } catch {
        // A directory that cannot be read says nothing about space; the write itself will tell.
        continue;
      }
      frees.set(dir, free);
      if (free < o.minFreeBytes && !low.has(dir)) {
        low.add(dir);
        log('error', 'free disk space is under --min-free-disk-bytes: writes are refused (503) until space is freed', { dir, freeBytes: free });
      } else if (free >= o.minFreeBytes && low.has(dir)) {
        low.delete(dir);
        log('info', 'free disk space is back over --min-free-disk-bytes: writes are taken again', { dir, freeBytes: free });
      }
    }
  };
  await poll();
  let polling = false;
  const timer = dirs.length ? setInterval(() => {
    if (polling) return;
    polling = true;
    void poll().finally(() => { polling = false; });
  }, o.intervalMs ?? 1_000) : undefined;
  timer?.unref();
  return {
    paused: () => low.size > 0,
    readings: () => [...frees].map(([dir, freeBytes]) => ({ dir, freeBytes })),
    hook: (_req, _reply, done) => done(low.size ? storageFullError() : undefined),
    close: () => clearInterval(timer),
  };
}
