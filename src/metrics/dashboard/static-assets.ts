import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { staticDir } from '../../core/paths.js';

/**
 * The dashboard's browser assets: a fixed allow-list, read once at start.
 * A request names a key of this list, never a path, so no URL can reach any
 * other file (`..`, encoded slashes, absolute paths all miss the map).
 */
const ASSET_TYPES: Readonly<Record<string, string>> = {
  'dashboard.css': 'text/css; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/** uPlot's browser build and stylesheet, served from its npm package: no CDN, and the CSP stays `'self'`. */
const UPLOT_ASSETS: Readonly<Record<string, string>> = {
  'uPlot.iife.min.js': 'text/javascript; charset=utf-8',
  'uPlot.min.css': 'text/css; charset=utf-8',
};

function uplotDir(): string {
  return path.dirname(createRequire(import.meta.url).resolve('uplot'));
}

export interface StaticAsset {
  /** Every asset is text (CSS, JavaScript, SVG). */
  body: string;
  contentType: string;
  /** Strong validator for conditional GETs. */
  etag: string;
}

export async function loadStaticAssets(dir: string = staticDir('metrics')): Promise<ReadonlyMap<string, StaticAsset>> {
  const assets = new Map<string, StaticAsset>();
  const files = [
    ...Object.entries(ASSET_TYPES).map(([name, type]) => [name, type, path.join(dir, name)] as const),
    ...Object.entries(UPLOT_ASSETS).map(([name, type]) => [name, type, path.join(uplotDir(), name)] as const),
  ];
  for (const [name, contentType, file] of files) {
    const body = await readFile(file, 'utf8');
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(name, { body, contentType, etag });
  }
  return assets;
}
