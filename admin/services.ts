// What request handlers may use: passed in, never imported, so tests start the real thing.
import type { Logger } from '../lib/index.js';
import type { AdminConfig } from './config.js';
import type { Pool } from './db/pool.js';
import type { DomainVerifier } from './domain-verifier.js';
import type { InviteMailer } from './invite-mailer.js';
import type { ProjectsKv } from './projects-kv.js';

export interface Services {
  readonly config: AdminConfig;
  readonly pool: Pool;
  readonly log: Logger;
  readonly projectsKv: ProjectsKv;
  readonly domainVerifier: DomainVerifier;
  /** undefined when no SMTP server is configured: invites are then not emailed. */
  readonly inviteMailer: InviteMailer | undefined;
}
