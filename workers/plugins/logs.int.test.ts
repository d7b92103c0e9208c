// Plugin log lines on their way to PLUGIN_LOGS (workers/plugins/logs.ts), against a real
// nats-server: what a config's logs will hold, read back from the stream.
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, ensurePipelineStreams, type NatsConnection } from '../../lib/index.js';
import { interceptCalls, startNats, TEST_PIPELINE_LIMITS, type NatsHandle } from '../../test/kit/index.js';
import { storedLogLines } from '../../test/plugins/instance.js';
import { PluginLogs, type PluginLogTarget } from './logs.js';

let nats: NatsHandle;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await nats.connect('plugin-logs-test');
  await ensurePipelineStreams(await jetstreamManager(nc), TEST_PIPELINE_LIMITS);
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

let nextConfig = 1;
function target(secrets: string[] = []): PluginLogTarget {
  return { teamId: 1, configId: nextConfig++, instanceId: '00000000-0000-4000-8000-000000000001', secrets };
}

describe('plugin logs', () => {
  it('logs - a publish stored but answered too late, retried with more lines: every line is stored', async () => {
    let publishes = 0;
    // The first publish reaches the stream, but its answer never reaches the worker (a timeout).
    const js = interceptCalls<JetStreamClient>(jetstream(nc), async (method, _args, call) => {
      if (method !== 'publish') return call();
      const answer = await call();
      if (++publishes === 1) throw new Error('TimeoutError: timeout');
      return answer;
    });
    const logs = new PluginLogs(js, { ratePerSecond: 1000 }, createLogger('test', 'silent'));
    const t = target();
    try {
      for (let i = 0; i < 3; i++) logs.write(t, 'CONSOLE', 'LOG', `before ${i}`);
      await logs.flush();
      expect(publishes).toBe(1);
      // Lines that joined before the retry, a SYSTEM line asking for the config to be disabled among them.
      logs.write(t, 'CONSOLE', 'LOG', 'after 0');
      logs.write(t, 'SYSTEM', 'ERROR', 'Disabled by the circuit breaker.', 'Disabled by the circuit breaker.');
      await logs.flush();
      expect(publishes).toBe(2);
    } finally {
      await logs.stop();
    }
    const lines = await storedLogLines(nc, t.configId);
    // Line ids: the admin server stores a line sent twice once.
    expect([...new Map(lines.map((l) => [l.id, l.message])).values()]).toEqual(['before 0', 'before 1', 'before 2', 'after 0', 'Disabled by the circuit breaker.']);
    expect(lines.find((l) => l.source === 'SYSTEM')?.disable_plugin_config).toBe('Disabled by the circuit breaker.');
  });

  it('logs - a secret is masked before a long message is cut, and as it reads inside JSON', async () => {
    const plain = 'sk-live-0123456789abcdef';
    const quoted = 'pa"ss\\wo\nrd-\u0001-ü';
    const t = target([plain, quoted]);
    const logs = new PluginLogs(jetstream(nc), { ratePerSecond: 1000 }, createLogger('test', 'silent'));
    try {
      // The secret straddles the 10,000-character cut.
      logs.write(t, 'CONSOLE', 'LOG', `${'x'.repeat(9_990)}${plain}${'y'.repeat(100)}`);
      // console.log(meta.config): the object as JSON, the secret's quote, backslash and control characters escaped.
      logs.write(t, 'CONSOLE', 'LOG', `config ${JSON.stringify({ key: quoted, other: 1 })}`);
      logs.write(t, 'SYSTEM', 'ERROR', `setup failed: ${quoted}`, `${'z'.repeat(9_995)}${plain}`);
    } finally {
      await logs.stop();
    }
    const lines = await storedLogLines(nc, t.configId);
    expect(lines.map((l) => l.message)).toEqual([
      `${'x'.repeat(9_990)}***${'y'.repeat(7)}… (cut: 10093 characters)`,
      'config {"key":"***","other":1}',
      'setup failed: ***',
    ]);
    expect(lines[2]!.disable_plugin_config).toBe(`${'z'.repeat(9_995)}***`);
    const text = JSON.stringify(lines);
    for (const leak of ['sk-live', 'pa\\"ss', 'pa"ss']) expect(text).not.toContain(leak);
  });
});
