/**
 * CSRF defence for the dashboard's form posts, on top of the SameSite=Strict
 * cookie: a browser names the page that sent a POST in `Origin` (or at least
 * says cross-site in `Sec-Fetch-Site`), so a post from any other site is
 * refused, including a forged sign-in into the attacker's tenant, which
 * SameSite alone does not stop (no cookie is needed for it). Clients that send
 * neither header are not browsers and carry no ambient credentials to abuse.
 */
export function isSameOriginPost(headers: { origin?: string | undefined; 'sec-fetch-site'?: string | undefined }, selfOrigin: string): boolean {
  const origin = headers.origin;
  if (origin !== undefined) return origin === selfOrigin;
  const site = headers['sec-fetch-site'];
  if (site !== undefined) return site === 'same-origin' || site === 'none';
  return true;
}
