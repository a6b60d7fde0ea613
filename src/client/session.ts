// Why: refresh tokens rotate and a reused one revokes the whole family, so exactly one refresh may be in flight however many calls wait on it.
import { SyncClientError } from './errors.js';
import { json, type RequestOptions, type Transport } from './transport.js';
import type { BusinessTokenReply, RefreshReply, SessionReply, User } from './wire.js';

/** What a signed-in client holds; apps may persist it (the sync client keeps it in its local store). */
export interface SavedSession {
  user: User;
  token: string;
  refreshToken: string;
  /** Expiry of `token`, epoch milliseconds by this device's clock (see `localExpiry`). */
  expiresAt: number;
}

/**
 * When a token expires by this device's clock: `expires_in` seconds from when it was asked for (`sentAt`), so a clock
 * set minutes away from the server's neither refreshes before every request nor sends lapsed tokens. From a server
 * without `expires_in`, its `expires_at` as it is.
 */
export function localExpiry(body: { expires_at: string; expires_in?: number }, sentAt: number): number {
  return typeof body.expires_in === 'number' && Number.isFinite(body.expires_in) ? sentAt + body.expires_in * 1000 : Date.parse(body.expires_at);
}

export interface SessionOptions {
  /** Refresh this long before `expires_at` (default 30 s), so a request never leaves with a token about to lapse. */
  refreshSkewMs?: number;
  /** The client's clock (default `Date.now`). */
  now?: () => number;
  /** Called whenever the tokens change (sign-in, refresh) and with null when the session ends. */
  onChange?: (session: SavedSession | null) => void;
  /** Called once when a refresh is refused: the user must sign in again. */
  onSessionExpired?: () => void;
}

interface BusinessToken { token: string; expiresAt: number }

/**
 * Holds the user's tokens and business-scoped tokens and sends authenticated
 * requests: a token close to expiry is refreshed first, a 401 triggers one
 * refresh and one retry, and concurrent callers share the same refresh.
 */
export class Session {
  private saved: SavedSession | null = null;
  private refreshing: Promise<void> | null = null;
  /** The last session ended by a refused refresh: calls fail with `session_expired` (as documented) until a sign-in. */
  private expired = false;
  private readonly businessTokens = new Map<string, BusinessToken>();
  private readonly businessTokenRequests = new Map<string, Promise<BusinessToken>>();
  /**
   * Moved on whenever a session is adopted, restored or ended (not when one is refreshed): the answer to a refresh, a
   * business token or a logout asked under an earlier session must not land in the current one (an app switching
   * accounts would act as the previous user again, or be signed out by its failure).
   */
  private generation = 0;
  private readonly skew: number;
  private readonly now: () => number;

  constructor(private readonly transport: Transport, private readonly options: SessionOptions = {}) {
    this.skew = options.refreshSkewMs ?? 30_000;
    this.now = options.now ?? Date.now;
  }

  get user(): User | undefined {
    return this.saved?.user;
  }

  get current(): SavedSession | null {
    return this.saved;
  }

  /** Waits as the transport does (attachment retries share the client's clock). */
  transportSleep(ms: number): Promise<void> {
    return this.transport.sleep(ms);
  }

  /** Adopts a session saved earlier (no request is made; the next call refreshes it if needed). */
  restore(saved: SavedSession | null): void {
    this.saved = saved;
    this.replaced();
  }

  /** `accept` may refuse the signed-in user (by throwing) before the session is adopted; see signIn. */
  async register(input: { email: string; name: string; password: string }, accept?: (user: User) => void): Promise<User> {
    const sentAt = this.now();
    return this.signIn(await this.transport.request('POST', '/api/auth/register', { json: input, read: json<SessionReply> }), sentAt, accept);
  }

  async login(input: { email: string; password: string }, accept?: (user: User) => void): Promise<User> {
    // Resent when it got no answer, like the sync calls: most often a pooled connection the server had just closed,
    // which it never read. Should the server have answered a lost one, that session goes unused and expires.
    const sentAt = this.now();
    return this.signIn(await this.transport.request('POST', '/api/auth/login', { json: input, idempotent: true, read: json<SessionReply> }), sentAt, accept);
  }

  /** Adopts a new session unless `accept` refuses its user; a refused one is revoked on the server (best effort). */
  private signIn(body: SessionReply, sentAt: number, accept: ((user: User) => void) | undefined): User {
    try {
      accept?.(body.user);
    } catch (e: unknown) {
      this.transport.request('POST', '/api/auth/logout', { token: body.token }).catch(() => undefined);
      throw e;
    }
    return this.adopt(body, sentAt);
  }

  /** Revokes the session on the server (its refresh token and every access token issued from it) and forgets it. */
  async logout(): Promise<void> {
    if (!this.saved) return;
    const generation = this.generation;
    try {
      await this.request('POST', '/api/auth/logout');
    } catch (e: unknown) {
      // Already expired or revoked on the server: forgetting it locally is all that is left to do.
      if (!(e instanceof SyncClientError && (e.code === 'session_expired' || e.code === 'unauthorized'))) throw e;
    }
    // Another sign-in came while the logout was on its way: that session stays.
    if (generation === this.generation) this.end(false);
  }

  /** Sends a request with the user token (refreshed when needed). */
  async request<T = Response>(method: string, path: string, options: RequestOptions<T> = {}): Promise<T> {
    const generation = this.generation;
    const token = await this.userToken();
    try {
      return await this.transport.request(method, path, { ...options, token });
    } catch (e: unknown) {
      if (!(e instanceof SyncClientError && e.code === 'unauthorized')) throw e;
      // Not sent again as whoever signed in meanwhile.
      if (generation !== this.generation) throw this.switched();
      // Another caller may have refreshed while this request was out; only refresh if the token used is still current.
      if (this.saved?.token === token) await this.refresh();
      return this.transport.request(method, path, { ...options, token: await this.userToken() });
    }
  }

  /** Sends a request with a business-scoped token for `businessId` (obtained, and renewed, through the user token). */
  async businessRequest<T = Response>(businessId: string, method: string, path: string, options: RequestOptions<T> = {}): Promise<T> {
    const generation = this.generation;
    const first = await this.businessToken(businessId);
    try {
      return await this.transport.request(method, path, { ...options, token: first.token });
    } catch (e: unknown) {
      if (!(e instanceof SyncClientError && e.code === 'unauthorized')) throw e;
      if (generation !== this.generation) throw this.switched();
      if (this.businessTokens.get(businessId) === first) this.businessTokens.delete(businessId);
      return this.transport.request(method, path, { ...options, token: (await this.businessToken(businessId)).token });
    }
  }

  /** Drops the cached business token (the feed was refused with it), so the next use fetches a fresh one. */
  forgetBusinessToken(businessId: string): void {
    this.businessTokens.delete(businessId);
  }

  /** A business token valid for at least the refresh skew; one request per business at a time. */
  async businessToken(businessId: string): Promise<BusinessToken> {
    const held = this.businessTokens.get(businessId);
    if (held && held.expiresAt - this.skew > this.now()) return held;
    let pending = this.businessTokenRequests.get(businessId);
    if (!pending) {
      const generation = this.generation;
      const asked: Promise<BusinessToken> = (async () => {
        const sentAt = this.now();
        const body = await this.request('POST', '/api/auth/token', { json: { business_id: businessId }, idempotent: true, read: json<BusinessTokenReply> });
        if (generation !== this.generation) throw this.switched();
        const t = { token: body.token, expiresAt: localExpiry(body, sentAt) };
        this.businessTokens.set(businessId, t);
        return t;
      })().finally(() => { if (this.businessTokenRequests.get(businessId) === asked) this.businessTokenRequests.delete(businessId); });
      pending = asked;
      this.businessTokenRequests.set(businessId, pending);
    }
    return pending;
  }

  /** The user access token, refreshed first when it expires within the skew. */
  async userToken(): Promise<string> {
    if (!this.saved) throw this.signedOut();
    if (this.saved.expiresAt - this.skew <= this.now()) await this.refresh();
    return this.saved!.token;
  }

  /** Resolves once no refresh is in flight (the client's close waits for one: its answer holds the only valid refresh token). */
  settled(): Promise<void> {
    return this.refreshing?.then(() => undefined, () => undefined) ?? Promise.resolve();
  }

  /** Exchanges the refresh token; concurrent callers share one exchange. */
  refresh(): Promise<void> {
    if (!this.refreshing) {
      const exchanging: Promise<void> = this.exchange().finally(() => { if (this.refreshing === exchanging) this.refreshing = null; });
      this.refreshing = exchanging;
    }
    return this.refreshing;
  }

  private async exchange(): Promise<void> {
    const saved = this.saved;
    if (!saved) throw this.signedOut();
    const generation = this.generation;
    let body: RefreshReply;
    const sentAt = this.now();
    try {
      body = await this.transport.request('POST', '/api/auth/refresh', { json: { refresh_token: saved.refreshToken }, finishOnClose: true, read: json<RefreshReply> });
    } catch (e: unknown) {
      // The session refused is no longer the current one: it ends nothing.
      if (generation !== this.generation) throw this.switched();
      // Only a refusal ends the session; being offline does not.
      if (e instanceof SyncClientError && (e.code === 'unauthorized' || e.code === 'invalid_request')) {
        this.end(true);
        throw new SyncClientError('session_expired', 'the session has expired or was revoked; sign in again', { status: e.status, cause: e });
      }
      throw e;
    }
    if (generation !== this.generation) throw this.switched();
    this.set({ user: saved.user, token: body.token, refreshToken: body.refresh_token, expiresAt: localExpiry(body, sentAt) });
  }

  /** What a call made under a session that another sign-in (or a sign-out) has replaced meanwhile fails with. */
  private switched(): SyncClientError {
    return new SyncClientError('not_signed_in', 'the session this call was made with was replaced (another sign-in or a sign-out) while it was on its way');
  }

  /** A session adopted, restored or ended: what was cached or asked for under the previous one is not for this one. */
  private replaced(): void {
    this.generation++;
    this.businessTokens.clear();
    this.businessTokenRequests.clear();
    this.refreshing = null;
  }

  private signedOut(): SyncClientError {
    return this.expired
      ? new SyncClientError('session_expired', 'the session has expired or was revoked; sign in again')
      : new SyncClientError('not_signed_in', 'sign in first (register or login)');
  }

  private adopt(body: SessionReply, sentAt: number): User {
    this.expired = false;
    this.replaced();
    this.set({ user: body.user, token: body.token, refreshToken: body.refresh_token, expiresAt: localExpiry(body, sentAt) });
    return body.user;
  }

  private set(saved: SavedSession): void {
    this.saved = saved;
    this.options.onChange?.(saved);
  }

  private end(expired: boolean): void {
    this.saved = null;
    this.expired = expired;
    this.replaced();
    this.options.onChange?.(null);
    if (expired) this.options.onSessionExpired?.();
  }
}
