import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { staticDir } from '../../core/paths.js';

/**
 * The dashboard's browser assets: a fixed allow-list, read once at start.
 * A request names a key of this list, never a path, so no URL can reach any
 * other file (`..`, encoded slashes, absolute paths all miss the map).
 */
const ASSET_TYPES: Readonly<Record<string, string>> = {
  'dashboard.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

export interface StaticAsset {
  /** Every asset is text (CSS, SVG). */
  body: string;
  contentType: string;
  /** Strong validator for conditional GETs. */
  etag: string;
}

export async function loadStaticAssets(dir: string = staticDir('metrics')): Promise<ReadonlyMap<string, StaticAsset>> {
  const assets = new Map<string, StaticAsset>();
  for (const [name, contentType] of Object.entries(ASSET_TYPES)) {
    const body = await readFile(path.join(dir, name), 'utf8');
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(name, { body, contentType, etag });
  }
  return assets;
}
