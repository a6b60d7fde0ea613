// How the shipped systemd unit starts the agent (node flags, environment), so the benchmark and the tests run it that way.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/core/paths.js';

export const UNIT_FILE = path.join(PROJECT_ROOT, 'deploy', 'host-agent.service');

export interface AgentLaunch {
  /** Flags between `node` and the bundle on the unit's ExecStart line. */
  nodeFlags: string[];
  /** The unit's `Environment=` assignments. */
  env: Record<string, string>;
}

/** Reads ExecStart (`<node> [flags] <.../host-agent.cjs> ...`) and every `Environment=KEY=VALUE ...` line. */
export function agentLaunch(unitText = readFileSync(UNIT_FILE, 'utf8')): AgentLaunch {
  const lines = unitText.split('\n').map((l) => l.trim());
  const exec = lines.find((l) => l.startsWith('ExecStart='))?.slice('ExecStart='.length).split(/\s+/);
  const bundleAt = exec?.findIndex((t) => t.endsWith('/host-agent.cjs')) ?? -1;
  if (!exec || bundleAt < 1) throw new Error(`${UNIT_FILE}: no ExecStart=<node> [flags] .../host-agent.cjs`);
  const env: Record<string, string> = {};
  for (const l of lines.filter((x) => x.startsWith('Environment='))) {
    for (const kv of l.slice('Environment='.length).split(/\s+/).filter(Boolean)) {
      const eq = kv.indexOf('=');
      if (eq < 1) throw new Error(`${UNIT_FILE}: ${l}: not KEY=VALUE`);
      env[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
  }
  return { nodeFlags: exec.slice(1, bundleAt), env };
}
