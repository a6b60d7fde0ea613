import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import ts from 'typescript';
import { PROJECT_ROOT } from '../../src/core/paths.js';

/**
 * The services' sources transpiled once to JavaScript under `<repo>/tmp/`
 * (ignored by git), so a test that starts a service dozens of times (the
 * kill -9 cycles) pays Node's start, not tsx's compilation, each time. Same
 * code, no type checking (typecheck does that); imports resolve from the
 * repository's node_modules and package.json as in the source tree.
 */
export interface CompiledServices {
  /** Directory holding `metrics/cli.js`, `sync/cli.js`, ... */
  dir: string;
  remove(): void;
}

export function compileServices(): CompiledServices {
  const dir = path.join(PROJECT_ROOT, 'tmp', `services-${randomBytes(4).toString('hex')}`);
  const src = path.join(PROJECT_ROOT, 'src');
  const walk = (from: string): string[] => readdirSync(from).flatMap((name) => {
    const p = path.join(from, name);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.ts') ? [p] : [];
  });
  for (const file of walk(src)) {
    const out = path.join(dir, path.relative(src, file)).replace(/\.ts$/, '.js');
    mkdirSync(path.dirname(out), { recursive: true });
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      fileName: file,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true, sourceMap: false },
    });
    writeFileSync(out, outputText);
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
