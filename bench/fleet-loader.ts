// Bench-only bulk loader: the peers' generated fleet written through MetricsStore.appendReports, kept on disk for reuse.
//
// Loading a month of a 100-host fleet through HTTP ingest would take hours on a small machine; the bench writes
// through the store's own bulk append in-process instead (the same writer thread, head, seals and rollups as
// ingest; only HTTP and JSON parsing are skipped) and then flushes, so every closed window is sealed and rolled
// up. With a data directory the SQLite database is kept there with a manifest, and a later run with the same
// size and seed reuses it instead of loading again.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { MetricsStore, NewReport } from '../src/metrics/domain/metrics-store.js';
import { ReportMetrics } from '../src/metrics/domain/report-shapes.js';

interface Sample { h: { agentId: string; hostname: string }; ts: number; v: Float64Array }
interface Gen {
  METRIC_NAMES: string[];
  defaults(o: Record<string, unknown>): Record<string, unknown>;
  generate(o: Record<string, unknown>): Iterable<Sample[]>;
}

export interface FleetSpec {
  hosts: number;
  days: number;
  seed: number;
  tenantName: string;
}

export interface Manifest extends FleetSpec {
  /** The newest report's time bound: data covers [end - days, end). */
  end: number;
  reports: number;
  loadSeconds: number;
  flushSeconds: number;
}

const MANIFEST = 'fleet.json';
/** Batches handed to the store at once: the generator fills the next while the writer thread commits. */
const IN_FLIGHT = 3;
/** Reports per appendReports call: the writer's largest commit. */
const BATCH = 2_000;

/** The manifest of a complete earlier load of the same fleet in `dir`, if there is one. */
export function reusable(dir: string, spec: FleetSpec): Manifest | undefined {
  const file = path.join(dir, MANIFEST);
  if (!existsSync(file)) return undefined;
  const m = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
  return m.hosts === spec.hosts && m.days === spec.days && m.seed === spec.seed && m.tenantName === spec.tenantName ? m : undefined;
}

/** Empties `dir` for a fresh load (a partial or different earlier load is dropped). */
export function prepareDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
}

/**
 * Generates the fleet (10 s reports, one tenant, ending at `end`) and loads it;
 * records the manifest in `dir` last, so an interrupted load is never reused.
 */
export async function loadFleet(genFile: string, store: MetricsStore, tenantId: string, spec: FleetSpec, end: number, dir: string | undefined, progress: (done: number, total: number) => void): Promise<Manifest> {
  const gen = (await import(pathToFileURL(genFile).href)) as Gen;
  const reports = spec.days * 8640;
  const total = reports * spec.hosts;
  const opts = gen.defaults({ hosts: spec.hosts, reports, tenants: 1, seed: spec.seed, start: end - reports * 10_000, batch: BATCH });
  const t0 = performance.now();
  const pending = new Set<Promise<unknown>>();
  let done = 0;
  let lastShown = 0;
  for (const batch of gen.generate(opts)) {
    const rows: NewReport[] = batch.map((s) => ({
      tenantId, hostId: s.h.agentId, hostname: s.h.hostname, platform: 'linux', ts: s.ts,
      metrics: ReportMetrics.of(gen.METRIC_NAMES.map((n, i) => [n, s.v[i]!])),
    }));
    const p = store.appendReports(rows).then((outcomes) => {
      if (outcomes.some((o) => o.status !== 'stored')) throw new Error(`load: a report was not stored (${JSON.stringify(outcomes.find((o) => o.status !== 'stored'))})`);
      done += rows.length;
    });
    pending.add(p);
    void p.finally(() => pending.delete(p)).catch(() => undefined);
    if (pending.size >= IN_FLIGHT) await Promise.race(pending);
    if (done - lastShown >= total / 100) { lastShown = done; progress(done, total); }
  }
  await Promise.all(pending);
  const loadSeconds = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  await store.flush();
  const manifest: Manifest = { ...spec, end, reports: total, loadSeconds, flushSeconds: (performance.now() - t1) / 1000 };
  if (dir) writeFileSync(path.join(dir, MANIFEST), JSON.stringify(manifest, null, 2));
  return manifest;
}
