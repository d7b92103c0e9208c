// Secrets at rest (docs/security.md, "Secrets at rest"): destination passwords, keys and tokens of
// batch exports and the secret fields of plugin configs are stored — in PostgreSQL and in the KV
// buckets — as AES-256-GCM ciphertexts under a key from configuration (SPATE_SECRET_KEY). The
// admin server encrypts; the workers (export runner, plugin runtime) decrypt.
//
// A secret value is stored in place of the plaintext, under the same field name, as
//   { "$encrypted": "v1:<key id>:<iv>:<ciphertext and tag>" }
// - v1: this format: AES-256-GCM, 12-byte random IV, 16-byte tag appended to the ciphertext;
// - key id: the first 16 hex digits of SHA-256 of the key, so a reader picks the right key once
//   keys rotate (SPATE_SECRET_KEYS_PREVIOUS);
// - iv, ciphertext and tag: base64url;
// - the plaintext is the JSON text of the value (a string stays a string);
// - the associated data is a context naming where the value belongs (secretContext), so a
//   ciphertext moved to another project's record or another field does not decrypt.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { setting } from './config.js';

export const SECRET_FORMAT_VERSION = 'v1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface SecretKey {
  readonly id: string;
  readonly bytes: Buffer;
}

export interface SecretKeyring {
  /** Encrypts every new value. */
  readonly current: SecretKey;
  /** Every key that may have encrypted a stored value, by id (the current one included). */
  readonly keys: ReadonlyMap<string, SecretKey>;
}

export interface EncryptedSecret {
  readonly $encrypted: string;
}

export class SecretKeyError extends Error {
  override name = 'SecretKeyError';
}

export type SecretDecryptionFailure = 'malformed' | 'unknown_key' | 'not_authentic';

export class SecretDecryptionError extends Error {
  override name = 'SecretDecryptionError';
  constructor(
    readonly code: SecretDecryptionFailure,
    message: string,
  ) {
    super(message);
  }
}

function secretKey(bytes: Buffer): SecretKey {
  if (bytes.length !== KEY_BYTES) throw new SecretKeyError(`a secret key is ${KEY_BYTES} bytes, not ${bytes.length}`);
  return { id: createHash('sha256').update(bytes).digest('hex').slice(0, 16), bytes };
}

/** A key as configured: 32 bytes in base64 (standard or URL-safe). */
export function parseSecretKey(text: string): Buffer {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) throw new SecretKeyError('not base64');
  const bytes = Buffer.from(trimmed, trimmed.includes('-') || trimmed.includes('_') ? 'base64url' : 'base64');
  if (bytes.length !== KEY_BYTES) throw new SecretKeyError(`${bytes.length} bytes; it must be ${KEY_BYTES} (e.g. openssl rand -base64 32)`);
  return bytes;
}

/** A new random key, base64: what npm start generates. */
export function generateSecretKey(): string {
  return randomBytes(KEY_BYTES).toString('base64');
}

export function secretKeyring(current: Buffer, previous: readonly Buffer[] = []): SecretKeyring {
  const currentKey = secretKey(current);
  const keys = new Map<string, SecretKey>();
  for (const k of previous.map(secretKey)) keys.set(k.id, k);
  keys.set(currentKey.id, currentKey);
  return { current: currentKey, keys };
}

export function isEncryptedSecret(value: unknown): value is EncryptedSecret {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length === 1 &&
    typeof (value as { $encrypted?: unknown }).$encrypted === 'string'
  );
}

/** Where a secret belongs: bound into its ciphertext as associated data. */
export function secretContext(kind: 'batch_export' | 'plugin_config', teamId: number, field: string): string {
  return `${kind}:${teamId}:${field}`;
}

export function encryptSecret(value: unknown, keyring: SecretKeyring, context: string): EncryptedSecret {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyring.current.bytes, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const sealed = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return { $encrypted: [SECRET_FORMAT_VERSION, keyring.current.id, iv.toString('base64url'), sealed.toString('base64url')].join(':') };
}

interface ParsedSecret {
  keyId: string;
  iv: Buffer;
  sealed: Buffer;
}

function parseSecret(secret: EncryptedSecret): ParsedSecret {
  const parts = secret.$encrypted.split(':');
  if (parts.length !== 4 || parts[0] !== SECRET_FORMAT_VERSION) {
    throw new SecretDecryptionError('malformed', `not a ${SECRET_FORMAT_VERSION} secret`);
  }
  const [, keyId, iv, sealed] = parts as [string, string, string, string];
  const ivBytes = Buffer.from(iv, 'base64url');
  const sealedBytes = Buffer.from(sealed, 'base64url');
  if (ivBytes.length !== IV_BYTES || sealedBytes.length < TAG_BYTES) throw new SecretDecryptionError('malformed', 'secret too short');
  return { keyId, iv: ivBytes, sealed: sealedBytes };
}

/** The id of the key a stored secret was encrypted with. */
export function secretKeyId(secret: EncryptedSecret): string {
  return parseSecret(secret).keyId;
}

export function decryptSecret(secret: EncryptedSecret, keyring: SecretKeyring, context: string): unknown {
  const { keyId, iv, sealed } = parseSecret(secret);
  const key = keyring.keys.get(keyId);
  if (!key) throw new SecretDecryptionError('unknown_key', `secret encrypted with key ${keyId}, which is not configured (SPATE_SECRET_KEY, SPATE_SECRET_KEYS_PREVIOUS)`);
  const decipher = createDecipheriv('aes-256-gcm', key.bytes, iv);
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  let text: string;
  try {
    text = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new SecretDecryptionError('not_authentic', `secret does not decrypt for ${context} (changed, or moved from elsewhere)`);
  }
  return JSON.parse(text) as unknown;
}

/**
 * A configuration with every encrypted value decrypted: what a destination or a plugin is given.
 * `context(field)` names where each field belongs (secretContext).
 */
export function decryptConfigSecrets(
  config: Readonly<Record<string, unknown>>,
  keyring: SecretKeyring,
  context: (field: string) => string,
): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, isEncryptedSecret(v) ? decryptSecret(v, keyring, context(k)) : v]));
}

// --- settings (admin server and worker) ----------------------------------------------------------

const KEY_HINT = '32 random bytes in base64 (openssl rand -base64 32; npm start generates one)';

const requiredKey = z
  .string({ error: `required: ${KEY_HINT}` })
  .transform((v, ctx) => {
    try {
      return parseSecretKey(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `${(err as Error).message}: expected ${KEY_HINT}` });
      return z.NEVER;
    }
  });

const previousKeys = z
  .string()
  .default('')
  .transform((v, ctx) => {
    const out: Buffer[] = [];
    for (const part of v.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
      try {
        out.push(parseSecretKey(part));
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: `a previous key is ${(err as Error).message}` });
        return z.NEVER;
      }
    }
    return out;
  });

/** SPATE_SECRET_KEY and SPATE_SECRET_KEYS_PREVIOUS, for the deployables that encrypt or decrypt secrets. */
export function secretKeySettings() {
  return {
    secretKey: setting(
      'SPATE_SECRET_KEY',
      requiredKey,
      'key (32 bytes, base64) that encrypts destination and plugin secrets in PostgreSQL and NATS KV; the same on every admin server and worker',
    ),
    previousSecretKeys: setting(
      'SPATE_SECRET_KEYS_PREVIOUS',
      previousKeys,
      'earlier values of SPATE_SECRET_KEY, comma-separated: secrets they encrypted still decrypt, and the admin server re-encrypts them with the current key at start',
    ),
  };
}

export function secretKeyringOf(config: { secretKey: Buffer; previousSecretKeys: readonly Buffer[] }): SecretKeyring {
  return secretKeyring(config.secretKey, config.previousSecretKeys);
}
