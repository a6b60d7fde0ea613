import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Packages `src/` imports as values (type-only imports vanish from the build). */
function valueImports(): Set<string> {
  const found = new Set<string>();
  for (const file of sources(path.join(ROOT, 'src'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^import\s+(?!type\s)[^'"]*?from\s+'([^'.][^']*)'/gm)) {
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
