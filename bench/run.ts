// Runs one benchmark by name: `npm run bench -- metrics` runs bench/metrics.ts.
// Each benchmark prints a Markdown section; `--write` also replaces that
// benchmark's section in docs/benchmarks.md (between its BEGIN/END markers).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here).filter((f) => f.endsWith('.ts') && f !== 'run.ts').map((f) => f.slice(0, -3));
const args = process.argv.slice(2);
const name = args.find((a) => !a.startsWith('--'));
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <${available.join('|')}> [--write] [benchmark options]`);
  process.exit(2);
}
const mod = (await import(pathToFileURL(path.join(here, `${name}.ts`)).href)) as { run(argv: string[]): Promise<string> };
const section = await mod.run(args.filter((a) => a !== name && a !== '--write'));
const machine = `${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}, ${os.type()} ${os.release()}`;
const body = `${section.trim()}\n\nMachine: ${machine}. Measured ${new Date().toISOString().slice(0, 10)}.\n`;
console.log(body);
if (args.includes('--write')) {
  const file = path.join(here, '..', 'docs', 'benchmarks.md');
  const doc = readFileSync(file, 'utf8');
  const begin = `<!-- BEGIN ${name} -->`;
  const end = `<!-- END ${name} -->`;
  const i = doc.indexOf(begin);
  const j = doc.indexOf(end);
  if (i === -1 || j === -1) throw new Error(`docs/benchmarks.md has no ${begin} ... ${end} section`);
  writeFileSync(file, doc.slice(0, i + begin.length) + '\n' + body + doc.slice(j));
}
