// retryUnanswered against a real nats-server that stops answering (SIGSTOP keeps its sockets open,
// as a server starved of CPU does): a start-up step waits it out, gives up naming itself after 6
// timeouts, and a refusal is not retried.
import { Writable } from 'node:stream';
import { jetstreamManager, JetStreamApiError } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/transport-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { retryUnanswered } from '../../lib/index.js';
import { startNats } from '../kit/index.js';

function capturingLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, sink), lines };
}

describe('retryUnanswered', () => {
  it('retryUnanswered - a step whose request times out runs again once the server answers, with a warning', async () => {
    await using nats = await startNats();
    const nc = await nats.connect('retry-test');
    const { logger, lines } = capturingLogger();
    const pid = nats.node.pid!;
    process.kill(pid, 'SIGSTOP');
    const resume = setTimeout(() => process.kill(pid, 'SIGCONT'), 6_000);
    try {
      let runs = 0;
      const jsm = await retryUnanswered('jetstream manager', () => (runs++, jetstreamManager(nc)), logger);
      expect((await jsm.getAccountInfo()).streams).toBe(0);
      expect(runs).toBe(2);
      expect(lines).toEqual([expect.objectContaining({ step: 'jetstream manager', attempt: 1, msg: 'NATS did not answer in time: trying again' })]);
    } finally {
      clearTimeout(resume);
      process.kill(pid, 'SIGCONT');
      await nc.close();
    }
  }, 30_000);

  it('retryUnanswered - a server silent for 6 requests in a row ends the step with an error that names it', async () => {
    const { logger, lines } = capturingLogger();
    let runs = 0;
    // The step stands in for a request to a server that never answers (6 x 5 s with a real one).
    const err: unknown = await retryUnanswered('projects bucket', () => (runs++, Promise.reject(new TimeoutError())), logger).catch((e: unknown) => e);
    expect(runs).toBe(6);
    expect(String(err)).toBe('Error: projects bucket: NATS did not answer after 6 tries');
    expect((err as Error).cause).toBeInstanceOf(TimeoutError);
    expect(lines.map((l) => l.attempt)).toEqual([1, 2, 3, 4, 5]);
  });

  it('retryUnanswered - an answer that refuses is thrown at once, not retried', async () => {
    await using nats = await startNats();
    const nc = await nats.connect('retry-test');
    const { logger, lines } = capturingLogger();
    try {
      const jsm = await jetstreamManager(nc);
      let runs = 0;
      const err: unknown = await retryUnanswered('stream info', () => (runs++, jsm.streams.info('MISSING')), logger).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(JetStreamApiError);
      expect(runs).toBe(1);
      expect(lines).toEqual([]);
    } finally {
      await nc.close();
    }
  });
});
