// Personal API keys (`phx_…`) and project API keys (`phc_…`): random base62 tokens. Personal
// keys are stored only as `sha256$<hex>` (no salt: the 35 random bytes make guessing hopeless,
// and an unsalted hash lets one indexed lookup find the key).
import { createHash, randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** base62 of `nbytes` random bytes read as one big-endian integer. */
export function randomToken(nbytes = 35): string {
  let n = BigInt(`0x${randomBytes(nbytes).toString('hex')}`);
  let out = '';
  do {
    out = BASE62[Number(n % 62n)]! + out;
    n /= 62n;
  } while (n > 0n);
  return out;
}

export const PERSONAL_KEY_PREFIX = 'phx_';
export const PROJECT_KEY_PREFIX = 'phc_';

export function generatePersonalApiKey(): string {
  return PERSONAL_KEY_PREFIX + randomToken(35);
}

export function generateProjectApiKey(): string {
  return PROJECT_KEY_PREFIX + randomToken(35);
}

export function hashPersonalApiKey(key: string): string {
  return `sha256$${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}

/** What may be shown of a key after creation: `phx_...abcd`. */
export function maskPersonalApiKey(key: string): string {
  return `${key.slice(0, 4)}...${key.slice(-4)}`;
}
