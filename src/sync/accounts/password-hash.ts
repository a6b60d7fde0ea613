import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashing with scrypt (RFC 7914), which is memory-hard: every guess
 * costs 128·N·r bytes of RAM as well as CPU, which is what makes GPU and ASIC
 * cracking expensive. Parameters follow OWASP's scrypt guidance (N=2^15, r=8,
 * p=3: 32 MiB per hash, the same work as N=2^17/p=1 with a quarter of the
 * memory, so concurrent logins cannot exhaust the server's RAM). Node runs
 * scrypt on the libuv thread pool, so hashing never blocks the event loop.
 *
 * Stored form: `scrypt$<log2N>$<r>$<p>$<salt base64>$<key base64>`, 16-byte
 * random salt, 32-byte key. Verification reads the parameters from the stored
 * hash, so raising the cost later leaves existing hashes valid.
 */
export const SCRYPT_R = 8;
export const SCRYPT_P = 3;
const SALT_BYTES = 16;
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, log2N: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** log2N;
  // Node refuses more than 32 MiB by default; allow exactly what these parameters need, with headroom.
  const options: ScryptOptions = { N, r, p, maxmem: 2 * 128 * N * r + 1024 * 1024 };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string, log2N: number): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, log2N, SCRYPT_R, SCRYPT_P);
  return ['scrypt', log2N, SCRYPT_R, SCRYPT_P, salt.toString('base64'), key.toString('base64')].join('$');
}

/** Constant-time comparison of the derived key; false for a malformed stored hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [log2N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![log2N, r, p].every((n) => Number.isInteger(n) && n > 0) || log2N > 24) return false;
  const salt = Buffer.from(parts[4]!, 'base64');
  const expected = Buffer.from(parts[5]!, 'base64');
  const key = await derive(password, salt, log2N, r, p);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

const dummyHashes = new Map<number, Promise<string>>();

/**
 * A valid hash of a random password at the given cost, made once per process.
 * Logins for unknown e-mails verify against it, so they take as long as logins
 * with a wrong password and timing does not reveal which accounts exist.
 */
export function dummyHash(log2N: number): Promise<string> {
  let h = dummyHashes.get(log2N);
  if (!h) {
    h = hashPassword(randomBytes(18).toString('base64'), log2N);
    dummyHashes.set(log2N, h);
  }
  return h;
}
