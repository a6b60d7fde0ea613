import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import type { OptionsSpec } from '../../src/core/config.js';
import { metricsOptions } from '../../src/metrics/config.js';
import { syncOptions } from '../../src/sync/config.js';
import { agentOptions } from '../../src/agent/agent-options.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { nodeEntry } from '../helpers/node-entry.js';


interface Cli { name: string; script: string; help: string[]; serve: string[]; spec: OptionsSpec; portEnv?: string }

/** The one CLI error style: `program: what is wrong (see program --help)`, one line. */
function oneLineError(cli: Cli): RegExp {
  return new RegExp(`^${cli.name}: .+ \\(see ${cli.name}${cli.name === 'sync-service' ? ' serve' : ''} --help\\)\\n$`);
}

const CLIS: Cli[] = [
  { name: 'metrics-service', script: 'src/metrics/cli.ts', help: ['--help'], serve: ['serve'], spec: metricsOptions, portEnv: 'METRICS_PORT' },
  { name: 'sync-service', script: 'src/sync/cli.ts', help: ['serve', '--help'], serve: ['serve'], spec: syncOptions, portEnv: 'SYNC_PORT' },
  { name: 'host-agent', script: 'src/agent/cli.ts', help: ['--help'], serve: [], spec: agentOptions },
];

/** As `run`, without blocking this process (a port held here must keep answering). */
async function runAsync(cli: Cli, args: string[]): Promise<{ status: number | null; out: string }> {
  const child = spawn(process.execPath, [...nodeEntry(cli.script), ...args], { cwd: PROJECT_ROOT, env: { PATH: process.env['PATH'] ?? '', LOG_LEVEL: 'warn' } });
  let out = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
  const [status] = await once(child, 'exit') as [number | null];
  return { status, out };
}

function run(cli: Cli, args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [...nodeEntry(cli.script), ...args], {
    cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 30_000, env: { PATH: process.env['PATH'] ?? '', ...env },
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

for (const cli of CLIS) {
  test(`${cli.name} --help lists every option with its flag and environment variable`, () => {
    const r = run(cli, cli.help);
    assert.equal(r.status, 0, r.out);
    for (const o of Object.values(cli.spec)) {
      assert.ok(r.out.includes(`--${o.flag}`), `${cli.name} --help lacks --${o.flag}`);
      assert.ok(r.out.includes(`(${o.env})`), `${cli.name} --help lacks ${o.env}`);
    }
  });

  test(`${cli.name} refuses to start with one message listing every bad value`, () => {
    const r = run(cli, [...cli.serve, '--log-level', 'loud', '--no-such-option', 'x', ...(cli.portEnv ? ['--port', 'eighty'] : ['--interval-ms', 'soon'])]);
    assert.equal(r.status, 2, r.out);
    assert.match(r.out, oneLineError(cli));
    assert.match(r.out, /--log-level .*"loud" is not one of/);
    assert.match(r.out, /unknown option --no-such-option/);
    assert.match(r.out, cli.portEnv ? /--port .*"eighty" is not an integer/ : /--interval-ms .*"soon" is not an integer/);
    assert.doesNotMatch(r.out, /\n\s+at /, 'no stack trace');
  });
}

test('sync-service names a directory it cannot create by what it is for', { skip: process.platform !== 'linux' && 'procfs is Linux\'s' }, (t) => {
  const sync = CLIS.find((c) => c.name === 'sync-service')!;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dir-error-'));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const r = run(sync, [...sync.serve, '--port', '0', '--data-dir', dataDir, '--attachment-dir', '/proc/fleetsync-cli-test/attachments']);
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /^sync-service: cannot create the attachment directory \/proc\/fleetsync-cli-test\/attachments\/\.incoming: ENOENT: no such file or directory, mkdir '\/proc\/fleetsync-cli-test'\n$/);
});

for (const cli of CLIS.filter((c) => c.portEnv)) {
  // Node's recursive mkdir spins for ever under procfs; the service must say what it could not create and exit.
  test(`${cli.name} with a data directory that cannot be created exits naming it (under /proc, where fs.mkdir would spin)`, { skip: process.platform !== 'linux' && 'procfs is Linux\'s' }, () => {
    const r = run(cli, [...cli.serve, '--port', '0', '--data-dir', '/proc/fleetsync-cli-test/data']);
    assert.equal(r.status, 1, r.out);
    assert.match(r.out, new RegExp(`^${cli.name}: cannot open the database /proc/fleetsync-cli-test/data/\\w+\\.db: ENOENT: no such file or directory, mkdir '/proc/fleetsync-cli-test'`));
    assert.doesNotMatch(r.out, /\n\s+at /, 'no stack trace');
  });

  test(`${cli.name} reads options from the environment and validates them the same way`, () => {
    const r = run(cli, cli.serve, { [cli.portEnv!]: '99999', LOG_LEVEL: 'chatty', REDIS_URL: 'http://not-redis' });
    assert.equal(r.status, 2, r.out);
    assert.match(r.out, oneLineError(cli));
    assert.match(r.out, new RegExp(`${cli.portEnv}: 99999 is above the maximum 65535`));
    assert.match(r.out, /LOG_LEVEL: "chatty" is not one of/);
    assert.match(r.out, /REDIS_URL: invalid value: must be a URL starting with redis:\/\/ or rediss:\/\//);
  });

  test(`${cli.name} never echoes a secret option's value in its errors`, () => {
    const r = run(cli, [...cli.serve, '--database-url', 'mysql://user:s3cr3t-pw@db/x', '--metrics-token', 'short-s3cr3t']);
    assert.equal(r.status, 2, r.out);
    assert.match(r.out, /--database-url \/ DATABASE_URL: invalid value: must be a URL starting with postgres:\/\/ or postgresql:\/\/;/);
    assert.match(r.out, /--metrics-token \/ \w+: invalid value: must be 16-512 characters of A-Z, a-z, 0-9 and \. _ ~ \+ \/ = -/);
    assert.doesNotMatch(r.out, /s3cr3t/);
  });
}

test('metrics-service --secret too short says the rule it broke: at least 16 characters', () => {
  const r = run(CLIS[0]!, ['serve', '--secret', 'short']);
  assert.equal(r.status, 2, r.out);
  assert.equal(r.out, 'metrics-service: --secret / METRICS_SECRET: invalid value: must be at least 16 characters (see metrics-service --help)\n');
});

test('every secret option of both services and the agent that refuses a value says its rule', () => {
  for (const cli of CLIS) {
    for (const o of Object.values(cli.spec).filter((x) => x.secret)) {
      try { o.parse('x'); } catch { assert.match(o.rule ?? '', /^must /, `${cli.name} --${o.flag} refuses "x" without a rule`); }
    }
  }
});

for (const cli of CLIS.filter((c) => c.portEnv)) {
  test(`${cli.name} serve on a port in use: one line naming the address and --port, exit 1, no stack trace`, async () => {
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'port-in-use-'));
      const r = await runAsync(cli, [...cli.serve, '--port', String(port), '--data-dir', dataDir]);
      rmSync(dataDir, { recursive: true, force: true });
      assert.equal(r.status, 1, r.out);
      assert.match(r.out, new RegExp(`^${cli.name}: 127\\.0\\.0\\.1:${port} is in use: is the .+ already running .+\\? --port chooses another\\n$`));
    } finally {
      holder.close();
    }
  });
}

for (const cli of CLIS.filter((c) => c.portEnv)) {
  test(`${cli.name} serve on an address it cannot listen on: one line naming the address, exit 1`, async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'listen-fails-'));
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine, so listening fails at once, without DNS.
    const r = await runAsync(cli, [...cli.serve, '--host', '192.0.2.1', '--port', '18099', '--data-dir', dataDir]);
    rmSync(dataDir, { recursive: true, force: true });
    assert.equal(r.status, 1, r.out);
    assert.match(r.out, new RegExp(`^${cli.name}: cannot listen on 192\\.0\\.2\\.1:18099: listen EADDRNOTAVAIL\\b.*\\n$`));
  });

  test(`${cli.name} serve on a PostgreSQL it cannot reach names the database, its password hidden, exit 1`, async () => {
    // Port 9 (discard) on loopback: refused at once where nothing listens on it.
    const r = await runAsync(cli, [...cli.serve, '--port', '0', '--database-url', 'postgres://app:s3cr3t-pw@127.0.0.1:9/fleet?sslpassword=k3y-pw']);
    assert.equal(r.status, 1, r.out);
    assert.equal(r.out, `${cli.name}: cannot connect to PostgreSQL at postgres://app:***@127.0.0.1:9/fleet?sslpassword=***: connect ECONNREFUSED 127.0.0.1:9\n`);
  });
}

test('sync-service with no command prints its usage to stderr and exits 2; asked for, to stdout with 0', () => {
  for (const [args, status, stream] of [[[], 2, 'stderr'], [['--help'], 0, 'stdout']] as const) {
    const r = spawnSync(process.execPath, [...nodeEntry('src/sync/cli.ts'), ...args], { cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 30_000, env: { PATH: process.env['PATH'] ?? '' } });
    assert.equal(r.status, status, `${args.join(' ')}: ${r.stderr}`);
    assert.match(stream === 'stderr' ? r.stderr : r.stdout, /sync-service serve/, `${args.join(' ')}: usage on ${stream}`);
    assert.equal(stream === 'stderr' ? r.stdout : r.stderr, '', `${args.join(' ')}: nothing on the other stream`);
  }
});

test('sync-service given options before its command says the command is missing, not that --port is one', () => {
  const r = run(CLIS[1]!, ['--port', '8081', 'serve']);
  assert.equal(r.status, 2, r.out);
  assert.equal(r.out, 'sync-service: missing command (serve) before the options (see sync-service --help)\n');
});

test('docs/deployment.md documents every option of both services and the agent', () => {
  const doc = readFileSync(path.join(PROJECT_ROOT, 'docs', 'deployment.md'), 'utf8');
  for (const cli of CLIS) {
    for (const o of Object.values(cli.spec)) {
      assert.ok(doc.includes(`\`--${o.flag}\``), `docs/deployment.md lacks ${cli.name} --${o.flag}`);
      assert.ok(doc.includes(`\`${o.env}\``), `docs/deployment.md lacks ${cli.name} ${o.env}`);
    }
  }
});

test('docs/deployment.md shows the HAProxy configuration the scale tests run, verbatim', () => {
  const doc = readFileSync(path.join(PROJECT_ROOT, 'docs', 'deployment.md'), 'utf8');
  assert.ok(doc.includes(readFileSync(path.join(PROJECT_ROOT, 'deploy', 'haproxy.cfg'), 'utf8')));
});

test('one supported Node.js line everywhere: engines, README, architecture notes and the CI job (which tests the oldest)', () => {
  const engines = (JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  const majors = [...engines.matchAll(/\^(\d+)\./g)].map((m) => Number(m[1]));
  assert.deepEqual(majors, [22, 24], `engines: ${engines}`);
  assert.match(readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8'), /Node\.js 22 or 24/);
  assert.match(readFileSync(path.join(PROJECT_ROOT, 'docs', 'architecture.md'), 'utf8'), /22 and 24/);
  assert.match(readFileSync(path.join(PROJECT_ROOT, '.ci', 'run'), 'utf8'), new RegExp(`^NODE_LINE=${Math.min(...majors)}$`, 'm'));
});
