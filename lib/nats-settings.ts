// The NATS credentials settings every deployable shares (docs/security.md, "NATS users"): each
// role connects as its own user, whose permissions (deploy/nats/auth.conf) allow only what it does.
import { envString, setting } from './config.js';
import type { NatsAuth } from './nats.js';

export const NATS_ROLES = ['ingest', 'worker', 'admin'] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

/** The NATS user of each role (deploy/nats/auth.conf), and the operator user of tools and tests. */
export const NATS_USERS = {
  ingest: 'spate-ingest',
  worker: 'spate-worker',
  admin: 'spate-admin',
  operator: 'spate-operator',
} as const;

/** Reply inboxes of each role: its NATS user may subscribe only below this prefix. */
export const NATS_INBOX_PREFIXES: Readonly<Record<NatsRole, string>> = {
  ingest: '_INBOX_ingest',
  worker: '_INBOX_worker',
  admin: '_INBOX_admin',
};

/** NATS_USER, NATS_PASSWORD, NATS_CREDS, NATS_TLS_*, NATS_INBOX_PREFIX of a deployable. */
export function natsAuthSettings(role: NatsRole) {
  return {
    natsUser: setting('NATS_USER', envString(NATS_USERS[role]), 'NATS user this process connects as (deploy/nats/auth.conf gives each role its own)'),
    natsPassword: setting(
      'NATS_PASSWORD',
      envString(''),
      "the NATS user's password (npm start generates one); empty connects without credentials, which Spate's NATS configuration refuses",
    ),
    natsCreds: setting('NATS_CREDS', envString(''), 'path of a NATS .creds file (JWT and NKey seed) to authenticate with instead of NATS_USER / NATS_PASSWORD'),
    natsTlsCa: setting('NATS_TLS_CA', envString(''), 'CA certificate (PEM file) to verify the NATS servers with; set it when they require TLS'),
    natsTlsCert: setting('NATS_TLS_CERT', envString(''), 'client certificate (PEM file) for NATS servers that verify clients (mutual TLS)'),
    natsTlsKey: setting('NATS_TLS_KEY', envString(''), 'private key (PEM file) of NATS_TLS_CERT'),
    natsInboxPrefix: setting(
      'NATS_INBOX_PREFIX',
      envString(NATS_INBOX_PREFIXES[role]),
      "subject prefix of this process's reply inboxes; its NATS user may subscribe only there, so no other role reads its replies",
    ),
  };
}

export interface NatsAuthConfig {
  natsUser: string;
  natsPassword: string;
  natsCreds: string;
  natsTlsCa: string;
  natsTlsCert: string;
  natsTlsKey: string;
  natsInboxPrefix: string;
}

export function natsAuthOf(config: NatsAuthConfig): NatsAuth {
  const tls = config.natsTlsCa || config.natsTlsCert ? { caFile: config.natsTlsCa || undefined, certFile: config.natsTlsCert || undefined, keyFile: config.natsTlsKey || undefined } : undefined;
  return {
    user: config.natsCreds || !config.natsPassword ? undefined : config.natsUser,
    pass: config.natsPassword || undefined,
    credsFile: config.natsCreds || undefined,
    tls,
    inboxPrefix: config.natsInboxPrefix || undefined,
  };
}
