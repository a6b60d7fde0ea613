import { html } from './html-template.js';
import { pageLayout } from './page-layout.js';

/** The token form. `error` is shown above it after a failed attempt; the token itself is never echoed back. */
export function renderSignIn(opts: { error?: string } = {}): string {
  const body = html`<section class="signin">
<h1>Sign in</h1>
<p>Paste a tenant token (as printed by <code>metrics-service token create</code>) to see that tenant's hosts.</p>
${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}<form method="post" action="/signin">
<label for="token">Tenant token</label>
<input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required autofocus>
<button type="submit">Sign in</button>
</form>
</section>`;
  return pageLayout({ title: 'Sign in · Fleet metrics', body }).value;
}
