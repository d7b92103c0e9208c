import { describe, expect, it } from 'vitest';
import { ConfigError, configMarkdown, generateSecretKey } from '../lib/index.js';
import { loadWorkerConfig, workerConfigDefinition, workerHelp } from './config.js';

describe('worker config', () => {
  it('config - defaults suit a laptop', () => {
    const c = loadWorkerConfig({ SPATE_SECRET_KEY: generateSecretKey() });
    expect(c).toMatchObject({
      natsUrl: 'nats://127.0.0.1:4222',
      shardCount: 16,
      metricsPort: 0,
      leaseTtl: 10_000,
      dedupWindow: 3_600_000,
      batchMaxBytes: 8 * 1024 * 1024,
    });
    expect(c.workerId).toBe('');
    // The key that decrypts export and plugin secrets has no default.
    expect(() => loadWorkerConfig({})).toThrow(/SPATE_SECRET_KEY: required/);
  });

  it('config - reports every bad variable at once', () => {
    try {
      loadWorkerConfig({ SHARD_COUNT: '0', WORKER_LEASE_TTL: 'soon', WORKER_ID: 'has space', WORKER_METRICS_PORT: '-1' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const text = (err as ConfigError).problems.join('\n');
      for (const name of ['SHARD_COUNT', 'WORKER_LEASE_TTL', 'WORKER_ID', 'WORKER_METRICS_PORT']) expect(text).toContain(name);
    }
  });

  it('config - --help and the docs table (docs/configuration.md) list every setting', () => {
    const help = workerHelp();
    const md = configMarkdown(workerConfigDefinition);
    for (const s of Object.values(workerConfigDefinition)) {
      expect(help).toContain(s.env);
      expect(md).toContain(`\`${s.env}\``);
    }
  });
});
