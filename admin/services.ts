// What request handlers may use: passed in, never imported, so tests start the real thing.
import type { Logger, SecretKeyring } from '../lib/index.js';
import type { AdminConfig } from './config.js';
import type { Pool } from './db/pool.js';
import type { DomainVerifier } from './domain-verifier.js';
import type { InviteMailer } from './invite-mailer.js';
import type { KvMirror } from './kv-mirror.js';
import type { Outbox } from './outbox.js';
import type { ProjectsKv } from './projects-kv.js';

export interface Services {
  readonly config: AdminConfig;
  readonly pool: Pool;
  readonly log: Logger;
  /** Seals the secrets the server stores (SPATE_SECRET_KEY, admin/secrets-at-rest.ts). */
  readonly secrets: SecretKeyring;
  readonly projectsKv: ProjectsKv;
  /** spate-batch-exports: batch export id → what the export runner needs. */
  readonly batchExportsKv: KvMirror;
  /** spate-plugin-configs: project id → its enabled plugin configs, in order. */
  readonly pluginConfigsKv: KvMirror;
  /** spate-plugin-sources: SHA-256 of compiled plugin code → the code. */
  readonly pluginSourcesKv: KvMirror;
  /** Requests for workers (backfills, plugin jobs), published after their transaction commits. */
  readonly outbox: Outbox;
  readonly domainVerifier: DomainVerifier;
  /** undefined when no SMTP server is configured: invites are then not emailed. */
  readonly inviteMailer: InviteMailer | undefined;
}
