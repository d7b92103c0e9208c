// Domain ownership checks: the TXT record `_spate-challenge.<domain>` must hold the domain's
// verification challenge. Real DNS through node:dns, pointed at the configured resolvers.
import { Resolver } from 'node:dns/promises';
import { apiError } from './errors.js';

export const CHALLENGE_LABEL = '_spate-challenge';

/** Answers that mean "there is no such record" rather than "DNS could not be asked". */
const NO_RECORD = new Set(['ENODATA', 'ENOTFOUND', 'ENONAME', 'NXDOMAIN']);

export class DomainVerifier {
  private readonly resolver: Resolver;

  constructor(options: { servers: readonly string[]; timeoutMs: number }) {
    this.resolver = new Resolver({ timeout: options.timeoutMs, tries: 2 });
    if (options.servers.length > 0) this.resolver.setServers([...options.servers]);
  }

  /** The TXT strings published for `domain`'s challenge name (each record's chunks joined). */
  async challengeRecords(domain: string): Promise<string[]> {
    try {
      const records = await this.resolver.resolveTxt(`${CHALLENGE_LABEL}.${domain}`);
      return records.map((chunks) => chunks.join(''));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code && NO_RECORD.has(code)) return [];
      throw apiError(
        'verification_unavailable',
        `The DNS records of the domain could not be looked up (${code ?? 'error'}); try again later.`,
      );
    }
  }

  /** True when one of the records equals the challenge. */
  async verify(domain: string, challenge: string): Promise<boolean> {
    return (await this.challengeRecords(domain)).includes(challenge);
  }
}
