// The leader spreader against a real 3-node JetStream cluster: it must never hold up an ingest
// node's stop, even while it waits for replicas that cannot catch up (a NATS node down).
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { startNatsCluster } from '../kit/index.js';
import { createLogger, ensureStreams, StreamLeaderSpreader, streamLayout } from '../../lib/index.js';

describe('stream leader spreader', () => {
  it('stream leaders - stop ends a spread that waits for replicas of a NATS node that is down', { timeout: 60_000 }, async () => {
    await using cluster = await startNatsCluster(3);
    const nc = await cluster.connect('spreader-test');
    try {
      const jsm = await jetstreamManager(nc);
      const layout = streamLayout(16, 3);
      await ensureStreams(jsm, { replicas: 3, duplicateWindowMs: 60_000, maxAgeMs: 0, maxBytes: -1 }, layout);
      // A node that holds a replica of every stream is gone: no group is settled, and the first
      // spread waits (up to 10 s) for it.
      await cluster.nodes[2]!.kill();
      const spreader = new StreamLeaderSpreader(nc, jsm, layout, 60_000, createLogger('spreader-test', 'silent'));
      const started = spreader.start();
      await new Promise((r) => setTimeout(r, 500));
      const t0 = performance.now();
      await spreader.stop();
      const result = await started;
      expect(performance.now() - t0).toBeLessThan(1_500);
      expect(result?.spread).toBe(false);
    } finally {
      await nc.close();
    }
  });
});
