// A stray STREAM_* setting on one ingest node cannot change the cluster's streams: the first node
// records the limits in spate-cluster, a node with other limits refuses to start before touching
// the streams, and STREAM_LIMITS_UPDATE changes them on purpose.
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { ClusterSettingsMismatch, STREAMS } from '../lib/index.js';
import { silentLog } from '../test/ingest-harness.js';
import { startNats } from '../test/kit/index.js';
import { loadIngestConfig, startIngest } from './index.js';

const DAY_NS = 86_400 * 1e9;

describe('ingest stream limits', () => {
  it('stream limits - a node with another STREAM_MAX_AGE refuses to start and the streams keep their retention', async () => {
    await using nats = await startNats();
    const nc = await nats.connect('stream-limits-test');
    const jsm = await jetstreamManager(nc);
    const start = (env: Record<string, string>) => startIngest(loadIngestConfig({ ...nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1', ...env }), { log: silentLog });
    const maxAgeDays = async () => (await jsm.streams.info(STREAMS.events)).config.max_age / DAY_NS;

    const first = await start({});
    try {
      expect(await maxAgeDays()).toBe(7);
      const stray = await start({ STREAM_MAX_AGE: '1h' }).catch((e: unknown) => e);
      expect(stray).toBeInstanceOf(ClusterSettingsMismatch);
      expect(String(stray)).toContain('STREAM_MAX_AGE is 1h here but 7d in the cluster');
      expect(await maxAgeDays()).toBe(7);
      expect(await start({ STREAM_REPLICAS: '1', STREAM_MAX_BYTES: '1GiB' }).catch((e: unknown) => e)).toBeInstanceOf(ClusterSettingsMismatch);
      expect((await jsm.streams.info(STREAMS.historical)).config.max_bytes).toBe(-1);

      // On purpose: one node records new limits, then others must have them too.
      const longer = await start({ STREAM_MAX_AGE: '14d', STREAM_LIMITS_UPDATE: 'true' });
      await longer.stop();
      expect(await maxAgeDays()).toBe(14);
      expect(await start({}).catch((e: unknown) => e)).toBeInstanceOf(ClusterSettingsMismatch);
      const same = await start({ STREAM_MAX_AGE: '14d' });
      await same.stop();
    } finally {
      await first.stop();
      await nc.close();
    }
  }, 60_000);
});
