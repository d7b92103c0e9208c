// The secrets of a local cluster (`npm start`), generated on its first start and kept in
// $SPATE_DATA_DIR/secrets.json (mode 0600) so a restart finds the same ones: the NATS users'
// passwords (deploy/nats/auth.conf), the route password of a 3-node cluster, and the
// SPATE_SECRET_KEY that encrypts destination and plugin secrets (lost, they cannot be decrypted).
import { chmodSync, existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { generateSecretKey, NATS_USERS, parseSecretKey } from '../../lib/index.js';
import { randomPassword, type NatsServerAuth, type NatsUserName } from '../local/nats-server.js';

export const SECRETS_FILE = 'secrets.json';

const secretsSchema = z.looseObject({
  nats: z
    .object({
      passwords: z.record(z.string(), z.string().regex(/^[A-Za-z][A-Za-z0-9]{15,}$/)),
      routePassword: z.string().regex(/^[A-Za-z][A-Za-z0-9]{15,}$/),
    })
    .optional(),
  secretKey: z
    .string()
    .refine((v) => {
      try {
        return parseSecretKey(v).length === 32;
      } catch {
        return false;
      }
    }, 'not a 32-byte base64 key')
    .optional(),
});

export interface LocalSecrets {
  nats: NatsServerAuth;
  /** SPATE_SECRET_KEY of the admin server and the workers (base64). */
  secretKey: string;
}

/** Reads the data dir's secrets, generating whatever is missing (and writing them back). */
export function loadLocalSecrets(dataDir: string): LocalSecrets {
  const file = join(dataDir, SECRETS_FILE);
  const stored = existsSync(file) ? secretsSchema.parse(JSON.parse(readFileSync(file, 'utf8'))) : {};
  const passwords = { ...stored.nats?.passwords } as Record<string, string>;
  let changed = !existsSync(file);
  for (const user of Object.keys(NATS_USERS)) {
    if (!passwords[user]) {
      passwords[user] = randomPassword();
      changed = true;
    }
  }
  const routePassword = stored.nats?.routePassword ?? randomPassword();
  if (!stored.nats?.routePassword) changed = true;
  const secretKey = stored.secretKey ?? generateSecretKey();
  if (!stored.secretKey) changed = true;
  const secrets: LocalSecrets = { nats: { passwords: passwords as Record<NatsUserName, string>, routePassword }, secretKey };
  if (changed) {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ ...stored, ...secrets }, null, 2) + '\n', { mode: 0o600 });
    renameSync(tmp, file);
  } else if ((statSync(file).mode & 0o077) !== 0) {
    chmodSync(file, 0o600); // copied around with a looser mode: only the launcher's user reads it
  }
  return secrets;
}
