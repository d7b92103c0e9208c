import { describe, expect, it } from 'vitest';
import { ConfigError, configMarkdown } from '../lib/index.js';
import { adminConfigDefinition, adminConfigHelp, loadAdminConfig } from './config.js';

describe('admin config', () => {
  it('admin config - laptop defaults; only DATABASE_URL is required', () => {
    const c = loadAdminConfig({ DATABASE_URL: 'postgres://u@127.0.0.1:5432/spate' });
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
    expect(loadAdminConfig({ DATABASE_URL: 'postgres://x/y', LOG_RETENTION: '0' }).logRetention).toBe(0);
    expect(() => loadAdminConfig({ DATABASE_URL: 'postgres://x/y', LOG_BATCH_ROWS: '0' })).toThrow(/LOG_BATCH_ROWS/);
    expect(() => loadAdminConfig({})).toThrow(/DATABASE_URL/);
  });

  it('admin config - reads every variable and reports all bad ones at once', () => {
    const c = loadAdminConfig({
      DATABASE_URL: 'postgresql://x/y',
      ADMIN_PORT: '0',
      DNS_RESOLVER: '127.0.0.1:5353, [::1]:53,8.8.8.8',
      INVITE_VALIDITY: '1h',
      SMTP_URL: 'smtp://mail.example.com:587',
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
