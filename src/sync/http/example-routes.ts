import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import { PROJECT_ROOT, staticDir } from '../../core/paths.js';

/**
 * The client library's example page (two devices editing offline and resolving
 * a conflict) at `/example/`. A request names a key of this allow-list, never
 * a path, so no URL reaches another file. Files are read per request because
 * the browser bundle is build output (`npm run build:client` writes it to
 * dist/browser/) and may appear after the service started.
 */
const EXAMPLE_FILES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'example.js': 'text/javascript; charset=utf-8',
  'example.css': 'text/css; charset=utf-8',
  'fleetsync-client.js': 'text/javascript; charset=utf-8',
};

export function registerExampleRoutes(app: App): void {
  const dir = staticDir('sync');
  const bundleDir = path.join(PROJECT_ROOT, 'dist', 'browser');
  app.get('/example', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/example/'));
  app.get('/example/', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/example/index.html'));
  app.get('/example/:name', { schema: { hide: true } }, async (req, reply) => {
    const name = (req.params as { name: string }).name;
    const type = EXAMPLE_FILES[name];
    if (!type) throw new AppError('not_found', `no example file ${name}`);
    let body: Buffer;
    try {
      body = await readFile(path.join(name === 'fleetsync-client.js' ? bundleDir : dir, name));
    } catch {
      throw new AppError('not_found', name === 'fleetsync-client.js' ? 'the browser bundle is not built: run npm run build:client' : `no example file ${name}`);
    }
    return reply.header('content-type', type).header('cache-control', 'no-cache').send(body);
  });
}
