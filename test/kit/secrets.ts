// The SPATE_SECRET_KEY of every admin server and worker a test process starts (one per process,
// random), so a test can decrypt what they stored.
import { generateSecretKey, parseSecretKey, secretKeyring, type SecretKeyring } from '../../lib/index.js';

export const TEST_SECRET_KEY = generateSecretKey();

export function testSecretKeyring(): SecretKeyring {
  return secretKeyring(parseSecretKey(TEST_SECRET_KEY));
}
