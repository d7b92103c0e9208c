// The admin server's configuration: one zod definition, read from the environment once
// (lib loadConfig reports every problem at once and freezes the result).
import { z } from 'zod';
import type { ProjectLimitSettings } from './project-limits.js';
import { configHelp, envBool, envBytes, envDuration, envInt, envString, loadConfig, natsAuthSettings, secretKeySettings, setting, type ConfigOf } from '../lib/index.js';

const optionalUrl = (protocols: readonly string[]) =>
  z
    .string()
    .default('')
    .refine((v) => v === '' || protocols.some((p) => v.startsWith(`${p}://`)), {
      message: `expected a ${protocols.join(' or ')} URL, or empty`,
    });

// "host" or "host:port" or "[v6]:port", as node:dns Resolver.setServers takes them.
const resolverList = z
  .string()
  .default('')
  .transform((v) => v.split(',').map((s) => s.trim()).filter((s) => s !== ''))
  .refine((list) => list.every((s) => /^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]+)(:\d{1,5})?$/.test(s)), {
    message: 'expected comma-separated IP addresses, each optionally with :port (IPv6 with a port as [addr]:port)',
  });

// Base URLs of processes serving /metrics: "http://host:port", comma-separated.
const metricsUrlList = z
  .string()
  .default('')
  .transform((v) => v.split(',').map((s) => s.trim().replace(/\/+$/, '')).filter((s) => s !== ''))
  .refine((list) => list.every((s) => /^https?:\/\/[^/\s]+$/.test(s)), { message: 'expected comma-separated http(s)://host:port URLs' });

export const adminConfigDefinition = {
  databaseUrl: setting(
    'DATABASE_URL',
    z.string().regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL'),
    'PostgreSQL connection URL of the admin database (migrations are applied at start).',
  ),
  databasePoolSize: setting('DATABASE_POOL_SIZE', envInt(10, 1), 'Maximum PostgreSQL connections of the request pool.'),
  natsUrl: setting('NATS_URL', envString('nats://127.0.0.1:4222'), 'NATS server URL(s), comma-separated; the admin server keeps its KV buckets and pipeline streams there.'),
  ...natsAuthSettings('admin'),
  ...secretKeySettings(),
  projectsKvReplicas: setting('PROJECTS_KV_REPLICAS', envInt(1, 1), 'Replicas of the spate-projects KV bucket when the admin server creates it (3 on a 3-node JetStream cluster).'),
  projectsReconcileInterval: setting(
    'PROJECTS_RECONCILE_INTERVAL',
    envDuration('60s'),
    'How often the KV buckets (spate-projects, spate-batch-exports, spate-plugin-configs, spate-plugin-sources) are fully reconciled with PostgreSQL (besides at start and on every change).',
  ),
  pipelineReplicas: setting(
    'PIPELINE_REPLICAS',
    envInt(1, 1),
    'Replicas of the spate-batch-exports, spate-plugin-configs and spate-plugin-sources KV buckets and of the pipeline streams (PLUGIN_LOGS, BATCH_EXPORT_RUNS, BATCH_EXPORT_LOGS, BATCH_EXPORT_BACKFILLS, PLUGIN_JOBS) when the admin server creates them (3 on a 3-node JetStream cluster).',
  ),
  pipelineStreamMaxBytes: setting(
    'PIPELINE_STREAM_MAX_BYTES',
    envBytes('1GiB'),
    'Largest size of each pipeline stream; when one is full, publishers are refused (nothing stored is dropped).',
  ),
  pipelineRequestMaxAge: setting(
    'PIPELINE_REQUEST_MAX_AGE',
    envDuration('7d'),
    'How long backfill and plugin job requests stay in their streams for the runner and workers to read.',
  ),
  logBatchRows: setting('LOG_BATCH_ROWS', envInt(5000, 1), 'Most plugin log entries (or batch export run updates and log entries) stored by one INSERT.'),
  logRetention: setting(
    'LOG_RETENTION',
    envDuration('14d'),
    'Plugin and batch export log entries older than this are deleted (hourly); 0 keeps them forever.',
  ),
  backfillMaxRuns: setting(
    'BACKFILL_MAX_RUNS',
    envInt(50_000, 1),
    'Most runs (intervals) one batch export backfill may cover; a longer range answers 400.',
  ),
  host: setting('ADMIN_HOST', envString('127.0.0.1'), 'Address the admin HTTP server listens on.'),
  port: setting('ADMIN_PORT', envInt(8010, 0), 'Port the admin HTTP server listens on (0 picks a free one).'),
  trustProxy: setting(
    'ADMIN_TRUST_PROXY',
    envBool(false),
    'Trust X-Forwarded-Proto/Host from a reverse proxy when building absolute pagination URLs.',
  ),
  bodyLimit: setting('ADMIN_BODY_LIMIT', envBytes('1MiB'), 'Largest request body accepted (larger answers 413).'),
  headersTimeout: setting(
    'ADMIN_HEADERS_TIMEOUT',
    envDuration('10s'),
    "How long a client may take to send a request's headers; slower answers 408 and the connection is closed (at most ADMIN_REQUEST_TIMEOUT).",
  ),
  requestTimeout: setting(
    'ADMIN_REQUEST_TIMEOUT',
    envDuration('30s'),
    'How long a client may take to send a whole request, headers and body; slower answers 408 and the connection is closed.',
  ),
  dnsResolver: setting(
    'DNS_RESOLVER',
    resolverList,
    'DNS server(s) used to verify domains, e.g. 127.0.0.1:5353 or 1.1.1.1,8.8.8.8; empty uses the system resolvers.',
  ),
  dnsTimeout: setting('DNS_TIMEOUT', envDuration('5s'), 'Timeout of one DNS query during domain verification.'),
  inviteValidity: setting('INVITE_VALIDITY', envDuration('3d'), 'How long an organization invite stays valid (is_expired after that).'),
  smtpUrl: setting(
    'SMTP_URL',
    optionalUrl(['smtp', 'smtps']),
    'SMTP server for invite emails, e.g. smtp://user:pass@mail.example.com:587; empty sends no emails.',
  ),
  smtpFrom: setting('SMTP_FROM', envString('Spate <no-reply@localhost>'), 'Sender address of invite emails.'),
  inviteEmailsPerOrganization: setting(
    'INVITE_EMAILS_PER_ORGANIZATION',
    envInt(200, 1),
    'Invite emails one organization may send per INVITE_EMAIL_WINDOW; an invite that would send more answers 429 (nothing is created).',
  ),
  inviteEmailsPerAddress: setting(
    'INVITE_EMAILS_PER_ADDRESS',
    envInt(5, 1),
    'Invite emails one address may receive per INVITE_EMAIL_WINDOW, from all organizations together; more answers 429.',
  ),
  inviteEmailWindow: setting('INVITE_EMAIL_WINDOW', envDuration('1d'), 'The sliding window of INVITE_EMAILS_PER_ORGANIZATION and INVITE_EMAILS_PER_ADDRESS.'),
  projectEventsPerSecond: setting(
    'PROJECT_EVENTS_PER_SECOND',
    envInt(0, 0),
    "Realtime events per second one ingest node accepts from a project (past it: 429 with Retry-After): the default of a project's capture_events_per_second and the most it may be set to; 0 = no limit.",
  ),
  projectEventsPerDay: setting(
    'PROJECT_EVENTS_PER_DAY',
    envInt(0, 0),
    "Events per UTC day one ingest node accepts from a project (past it: dropped, answered 200 as PostHog does): the default of a project's capture_events_per_day and the most it may be set to; 0 = no quota.",
  ),
  projectHistoricalMessagesPerSecond: setting(
    'PROJECT_HISTORICAL_MESSAGES_PER_SECOND',
    envInt(100, 0),
    "HISTORICAL messages per second one ingest node publishes for a project (past it: 429 with Retry-After); each holds a message id in NATS memory for STREAM_HISTORICAL_DUPLICATE_WINDOW (~220 bytes, docs/capture-api.md): the default of a project's historical_messages_per_second and the most it may be set to; 0 = no limit.",
  ),
  clusterMetricsUrls: setting(
    'CLUSTER_METRICS_URLS',
    metricsUrlList,
    "Ingest nodes and workers (comma-separated base URLs, e.g. http://10.0.0.5:8031) whose /metrics the live page at GET / reads for events/s, lag and workers' shards; npm start sets it. Empty: the page shows what NATS and PostgreSQL tell (stream sizes, export runs, plugin errors).",
  ),
  liveRefresh: setting('LIVE_REFRESH', envDuration('2s'), 'How often the live page asks for new figures; the admin server reads the metrics at most once per half of it, however many pages are open.'),
  logLevel: setting(
    'LOG_LEVEL',
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    'Log level (pino).',
  ),
};

export type AdminConfig = ConfigOf<typeof adminConfigDefinition>;

/** The cluster's project limits of an admin configuration. */
export function projectLimitSettings(config: Pick<AdminConfig, 'projectEventsPerSecond' | 'projectEventsPerDay' | 'projectHistoricalMessagesPerSecond'>): ProjectLimitSettings {
  return {
    eventsPerSecond: config.projectEventsPerSecond,
    eventsPerDay: config.projectEventsPerDay,
    historicalMessagesPerSecond: config.projectHistoricalMessagesPerSecond,
  };
}

/**
 * The same, read from an environment alone (bootstrap and the CLI write project records too,
 * with the settings the admin server will have: the launcher gives them the same environment).
 */
export function projectLimitSettingsFromEnv(env: Readonly<Record<string, string | undefined>>): ProjectLimitSettings {
  const { projectEventsPerSecond, projectEventsPerDay, projectHistoricalMessagesPerSecond } = adminConfigDefinition;
  return projectLimitSettings(loadConfig({ projectEventsPerSecond, projectEventsPerDay, projectHistoricalMessagesPerSecond }, env));
}

export function loadAdminConfig(env: Readonly<Record<string, string | undefined>> = process.env): AdminConfig {
  return loadConfig(adminConfigDefinition, env);
}

export function adminConfigHelp(): string {
  return configHelp('spate admin server — the management API (organizations, members, invites, domains, projects, batch exports, plugins)', adminConfigDefinition);
}
