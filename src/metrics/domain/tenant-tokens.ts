import { randomBytes, randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import { generateToken, hashToken } from '../../core/auth/tokens.js';
import type { MetricsStore, TokenInfo } from './metrics-store.js';

/** Tenant names: what an operator types on the command line and sees in listings. */
export const TENANT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Prefix of metrics tokens, so a leaked one is recognisable (secret scanners, logs). */
export const TOKEN_PREFIX = 'mtk';

export interface ResolvedTenant {
  tenantId: string;
  tenantName: string;
  tokenId: string;
}

export interface IssuedToken extends ResolvedTenant {
  /** The bearer token itself: shown once, only its SHA-256 is stored. */
  token: string;
  /** True when this call created the tenant. */
  createdTenant: boolean;
}

/**
 * Issues a new token for the tenant called `tenantName`, creating the tenant
 * when it does not exist yet. A tenant may hold several tokens (one per agent
 * fleet, one for the dashboard...), each revocable on its own.
 */
export async function issueToken(store: MetricsStore, tenantName: string, now = Date.now()): Promise<IssuedToken> {
  if (!TENANT_NAME_PATTERN.test(tenantName)) {
    throw new AppError('invalid_request', 'tenant name: 1-64 characters of letters, digits, ".", "_" or "-", starting with a letter or digit');
  }
  let tenant = await store.findTenantByName(tenantName);
  let createdTenant = false;
  if (!tenant) {
    tenant = { id: randomUUID(), name: tenantName, createdAt: now };
    try {
      await store.createTenant(tenant);
      createdTenant = true;
    } catch (e: unknown) {
      // Lost a race with another creator of the same name: use theirs.
      const existing = await store.findTenantByName(tenantName);
      if (!existing) throw e;
      tenant = existing;
    }
  }
  const token = generateToken(TOKEN_PREFIX);
  const tokenId = `tok_${randomBytes(6).toString('hex')}`;
  await store.insertToken({ id: tokenId, tenantId: tenant.id, tokenHash: hashToken(token), createdAt: now });
  return { tenantId: tenant.id, tenantName: tenant.name, tokenId, token, createdTenant };
}

/** The tenant a bearer token belongs to; undefined for an unknown or revoked token. */
export async function resolveTenant(store: MetricsStore, token: string): Promise<ResolvedTenant | undefined> {
  return store.findActiveToken(hashToken(token));
}

export async function listTokens(store: MetricsStore): Promise<TokenInfo[]> {
  return store.listTokens();
}

/** Revokes a token at once: the next request carrying it gets 401. */
export async function revokeToken(store: MetricsStore, tokenId: string, now = Date.now()): Promise<void> {
  if (!(await store.revokeToken(tokenId, now))) throw new AppError('not_found', `no active token ${tokenId}`);
}
