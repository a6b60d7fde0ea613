import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/core/paths.js';

const pkg = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/**
 * Packages `src/` uses at run time: imported as values (type-only imports vanish from the build), statically or
 * when first needed (`await import('ioredis')`), or resolved in node_modules to be served as files (the dashboard's
 * chart library).
 */
function valueImports(): Set<string> {
  const found = new Set<string>();
  for (const file of sources(path.join(PROJECT_ROOT, 'src'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of [...text.matchAll(/^import\s+(?!type\s)[^'"]*?from\s+'([^'.][^']*)'/gm), ...text.matchAll(/\bimport\('([^'.][^']*)'\)/g), ...text.matchAll(/\.resolve\('([^'.][^']*)'\)/g)]) {
      const spec = m[1]!;
      if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      found.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  }
  return found;
}

test('runtime dependencies are exactly the packages src/ imports as values', () => {
  const used = valueImports();
  const declared = new Set(Object.keys(pkg.dependencies));
  for (const p of used) assert.ok(declared.has(p), `${p} is imported by src/ but not a dependency: a production install would lack it`);
  for (const p of declared) assert.ok(used.has(p), `${p} is a runtime dependency that src/ never imports as a value (a type-only or unused package belongs in devDependencies)`);
});
