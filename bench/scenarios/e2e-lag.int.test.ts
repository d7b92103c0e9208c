// The end-to-end lag scenario runs against real workers only in `npm run bench` (when they
// exist). Here its measuring code is checked against the PROCESSED contract with a stand-in
// processor: a consumer that copies every EVENTS message to processed.<projectId>.<shard>,
// adding person_id, as workers do.
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseNdjson, parseSubject, subjectFor, toNdjson, type CapturedEvent } from '../../lib/index.js';
import { startIngestHarness, type IngestHarness } from '../../test/ingest-harness.js';
import { measureEndToEndLag } from './e2e-lag.js';

const KEY = 'phc_e2e_bench';
let h: IngestHarness;

beforeAll(async () => {
  h = await startIngestHarness({ SPIKE_EVENTS_PER_SECOND: '0' }, { [KEY]: 5 });
});
afterAll(async () => {
  await h?.stop();
});

async function startStandInProcessor(): Promise<() => Promise<void>> {
  const js = jetstream(h.nc);
  const consumer = await js.consumers.get('EVENTS', { filter_subjects: 'events.>', deliver_policy: DeliverPolicy.New });
  const messages = await consumer.consume();
  const done = (async () => {
    for await (const m of messages) {
      const where = parseSubject(m.subject)!;
      const events = parseNdjson<CapturedEvent>(m.data).map((e) => ({ ...e, person_id: '00000000-0000-4000-8000-000000000000' }));
      await js.publish(subjectFor('processed', where.projectId, where.shard), toNdjson(events));
    }
  })();
  return async () => {
    await messages.close();
    await done;
  };
}

describe('bench e2e lag', () => {
  it('e2e lag - measures the pipeline maximum and the lag at fractions of it from PROCESSED lines', async () => {
    const stop = await startStandInProcessor();
    try {
      const points = await measureEndToEndLag({ captureUrl: h.url, nc: h.nc, key: KEY, projectId: 5, durationS: 1, fractions: [0.5], connections: 4, drainTimeoutS: 20, log: () => undefined });
      expect(points).toHaveLength(2);
      const [max, half] = points;
      expect(max!.sentEvents).toBeGreaterThan(0);
      expect(max!.processedEvents).toBeGreaterThanOrEqual(max!.sentEvents);
      expect(max!.processedPerSec).toBeGreaterThan(0);
      expect(half!.fraction).toBe(0.5);
      expect(half!.offeredEventsPerSec).toBeCloseTo(max!.processedPerSec / 2, 0);
      expect(half!.processedEvents).toBeGreaterThanOrEqual(half!.sentEvents);
      expect(half!.processedEvents).toBeGreaterThan(0);
      for (const p of points) {
        expect(p.p50).toBeGreaterThan(0);
        expect(p.p99).toBeGreaterThanOrEqual(p.p50);
        expect(p.max).toBeLessThan(20_000);
      }
    } finally {
      await stop();
    }
  });

  it('e2e lag - a warm-up is sent and processed first and counted in no phase', async () => {
    const stop = await startStandInProcessor();
    const logged: string[] = [];
    try {
      const points = await measureEndToEndLag({
        captureUrl: h.url,
        nc: h.nc,
        key: KEY,
        projectId: 5,
        durationS: 1,
        fractions: [],
        connections: 4,
        drainTimeoutS: 20,
        warmUpEvents: 3_000,
        log: (m) => logged.push(m),
      });
      expect(logged.find((m) => m.startsWith('e2e lag warm-up:'))).toMatch(/^e2e lag warm-up: 3000 of 3000 events processed/);
      const [max] = points;
      expect(points).toHaveLength(1);
      // The maximum counts its own events and at most the requests still in flight at its end (4 × 100), none of the warm-up's.
      expect(max!.processedEvents).toBeGreaterThanOrEqual(max!.sentEvents);
      expect(max!.processedEvents).toBeLessThanOrEqual(max!.sentEvents + 400);
    } finally {
      await stop();
    }
  });
});
