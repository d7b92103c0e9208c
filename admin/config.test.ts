import { describe, expect, it } from 'vitest';
import { ConfigError, configMarkdown, generateSecretKey } from '../lib/index.js';
import { adminConfigDefinition, adminConfigHelp, loadAdminConfig } from './config.js';

/** The one other required setting: the key that encrypts stored secrets. */
const KEY = { SPATE_SECRET_KEY: generateSecretKey() };

describe('admin config', () => {
  it('admin config - laptop defaults; only DATABASE_URL and SPATE_SECRET_KEY are required', () => {
    const c = loadAdminConfig({ DATABASE_URL: 'postgres://u@127.0.0.1:5432/spate', ...KEY });
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8010,
      natsUrl: 'nats://127.0.0.1:4222',
      inviteValidity: 3 * 86_400_000,
      dnsResolver: [],
      smtpUrl: '',
      projectsKvReplicas: 1,
      pipelineReplicas: 1,
      pipelineStreamMaxBytes: 1024 ** 3,
      pipelineRequestMaxAge: 7 * 86_400_000,
      logBatchRows: 5000,
      logRetention: 14 * 86_400_000,
      backfillMaxRuns: 50_000,
    });
    expect(loadAdminConfig({ DATABASE_URL: 'postgres://x/y', LOG_RETENTION: '0', ...KEY }).logRetention).toBe(0);
    expect(() => loadAdminConfig({ DATABASE_URL: 'postgres://x/y', LOG_BATCH_ROWS: '0', ...KEY })).toThrow(/LOG_BATCH_ROWS/);
    expect(() => loadAdminConfig({ ...KEY })).toThrow(/DATABASE_URL/);
    // Without the key the server refuses to start rather than store secrets in plain text.
    expect(() => loadAdminConfig({ DATABASE_URL: 'postgres://x/y' })).toThrow(/SPATE_SECRET_KEY: required: 32 random bytes in base64/);
  });

  it('admin config - reads every variable and reports all bad ones at once', () => {
    const c = loadAdminConfig({
      DATABASE_URL: 'postgresql://x/y',
      ADMIN_PORT: '0',
      DNS_RESOLVER: '127.0.0.1:5353, [::1]:53,8.8.8.8',
      INVITE_VALIDITY: '1h',
      SMTP_URL: 'smtp://mail.example.com:587',
      ...KEY,
    });
    expect(c.dnsResolver).toEqual(['127.0.0.1:5353', '[::1]:53', '8.8.8.8']);
    expect(c.inviteValidity).toBe(3_600_000);
    try {
      loadAdminConfig({ DATABASE_URL: 'mysql://x', ADMIN_PORT: 'x', DNS_RESOLVER: 'dns.google', SMTP_URL: 'http://x', INVITE_VALIDITY: 'soon' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const name of ['DATABASE_URL', 'ADMIN_PORT', 'DNS_RESOLVER', 'SMTP_URL', 'INVITE_VALIDITY']) expect(problems).toContain(name);
    }
  });

  it('admin config - --help and the docs table (docs/configuration.md) describe every variable', () => {
    const help = adminConfigHelp();
    const md = configMarkdown(adminConfigDefinition);
    for (const s of Object.values(adminConfigDefinition)) {
      expect(s.description.length).toBeGreaterThan(10);
      expect(help).toContain(s.env);
      expect(md).toContain(`\`${s.env}\``);
    }
  });
});
