// The end-to-end stage runs against a whole cluster only in `npm run bench`. Here its measuring
// code is checked against the PROCESSED contract with a stand-in processor: a consumer that
// copies every EVENTS message to processed.<projectId>.<shard>, adding person_id, as workers do;
// "pausing the workers" stops it, and resuming starts it again from where it was.
import { DeliverPolicy, jetstream, type ConsumerMessages } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseNdjson, parseSubject, subjectFor, toNdjson, type CapturedEvent } from '../../lib/index.js';
import { startIngestHarness, type IngestHarness } from '../../test/ingest-harness.js';
import { measurePipeline } from './e2e-pipeline.js';

const KEY = 'phc_e2e_bench';
let h: IngestHarness;

beforeAll(async () => {
  h = await startIngestHarness({ SPIKE_EVENTS_PER_SECOND: '0' }, { [KEY]: 5 });
});
afterAll(async () => {
  await h?.stop();
});

/** A stand-in for the workers, with pause and resume (it goes on after the last message it copied). */
function standInProcessor() {
  const js = jetstream(h.nc);
  let lastSeq = 0;
  let running: { messages: ConsumerMessages; done: Promise<void> } | undefined;
  const start = async () => {
    const consumer = await js.consumers.get('EVENTS', lastSeq === 0 ? { filter_subjects: 'events.>', deliver_policy: DeliverPolicy.New } : { filter_subjects: 'events.>', opt_start_seq: lastSeq + 1 });
    const messages = await consumer.consume();
    const done = (async () => {
      for await (const m of messages) {
        const where = parseSubject(m.subject)!;
        const events = parseNdjson<CapturedEvent>(m.data).map((e) => ({ ...e, person_id: '00000000-0000-4000-8000-000000000000' }));
        await js.publish(subjectFor('processed', where.projectId, where.shard), toNdjson(events));
        lastSeq = m.seq;
      }
    })();
    running = { messages, done };
  };
  const stop = async () => {
    const r = running;
    running = undefined;
    await r?.messages.close();
    await r?.done;
  };
  return { start, stop };
}

describe('bench e2e pipeline', () => {
  it('e2e pipeline - capture alone, capture with the pipeline running and lag at a constant rate, from PROCESSED lines', async () => {
    const processor = standInProcessor();
    await processor.start();
    let paused = 0;
    let pausing: Promise<void> = Promise.resolve();
    try {
      const result = await measurePipeline(
        {
          captureUrl: h.url,
          nc: h.nc,
          key: KEY,
          projectId: 5,
          processes: [{ role: 'ingest', pid: process.pid }],
          pauseWorkers: () => {
            paused++;
            pausing = processor.stop();
          },
          resumeWorkers: () => void pausing.then(() => processor.start()),
        },
        { durationS: 1, fractions: [0.5], warmUpEvents: 2_000, perRequest: 100, persons: 200, connections: 4, drainTimeoutS: 30, log: () => undefined },
      );
      expect(paused).toBe(1);
      expect(result.warmUp.events).toBeGreaterThanOrEqual(2_000);
      expect(result.captureAlone.capturedPerSec).toBeGreaterThan(0);
      expect(result.captureAlone.processedPerSec).toBeNaN();
      expect(result.running.processedPerSec).toBeGreaterThan(0);
      expect(result.ratio).toBeCloseTo(result.running.processedPerSec / result.captureAlone.capturedPerSec, 5);
      const [half] = result.paced;
      expect(half!.fraction).toBe(0.5);
      expect(half!.offeredEventsPerSec).toBeCloseTo(result.captureAlone.capturedPerSec / 2, 0);
      // Every event sent in the measured window came out of PROCESSED, none of another phase.
      expect(half!.sentEvents).toBeGreaterThan(0);
      expect(half!.processedEvents).toBe(half!.sentEvents);
      expect(half!.p50).toBeGreaterThan(0);
      expect(half!.p99).toBeGreaterThanOrEqual(half!.p50);
      expect(half!.max).toBeLessThan(20_000);
      // This test process stood in for the ingest node: its CPU per event is a number.
      expect(half!.cpu.ingest).toBeGreaterThan(0);
      expect(result.mix.identify).toBeGreaterThan(0);
    } finally {
      await pausing;
      await processor.stop();
    }
  });
});
