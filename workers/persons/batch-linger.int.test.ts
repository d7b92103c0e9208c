// At moderate rates a shard's messages arrive one at a time; a batch per message costs the worker
// and PostgreSQL several times as much per event as under load. A batch that would not fill its
// limits waits WORKER_BATCH_LINGER for more.
import { describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { freshDatabase, startNats, waitFor } from '../../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, readProcessed, testDeps, workerConfig } from '../../test/workers/harness.js';
import { startWorker } from '../index.js';

/** Publishes `messages` messages of 10 events to one shard, one every `gapMs`; returns how many PROCESSED messages carried them. */
async function processedMessagesFor(linger: string, messages: number, gapMs: number): Promise<{ processedMessages: number; events: number }> {
  await using nats = await startNats();
  const { nc, js } = await connectAndCreateStreams(nats.url);
  const worker = await startWorker(workerConfig(nats.url, await freshDatabase(), { WORKER_BATCH_LINGER: linger }), testDeps());
  try {
    // One distinct id: one shard, one subject.
    const warm = [capture(3, 'warm', 'linger-user')];
    await publishEvents(js, warm);
    await waitFor('the worker to process a first event', async () => (await readProcessed(nc)).length === 1, 30_000, 50);
    const jsm = await jetstreamManager(nc);
    const before = (await jsm.streams.info('PROCESSED')).state.messages;
    for (let i = 0; i < messages; i++) {
      await publishEvents(js, Array.from({ length: 10 }, () => capture(3, 'step', 'linger-user')), { perMessage: 10 });
      await new Promise((r) => setTimeout(r, gapMs));
    }
    let lines = 0;
    await waitFor('every event processed', async () => (lines = (await readProcessed(nc)).length) === 1 + messages * 10, 30_000, 100);
    return { processedMessages: (await jsm.streams.info('PROCESSED')).state.messages - before, events: lines - 1 };
  } finally {
    await worker.stop();
    await nc.close();
  }
}

describe('batch linger', () => {
  it('linger - messages a shard receives within WORKER_BATCH_LINGER of each other are processed as one batch', async () => {
    // 8 messages 200 ms apart (~1.6 s in all): a batch lingering 5 s takes them all; without
    // lingering, each arrives to an idle shard and is a batch (a PROCESSED message) of its own.
    // (Gaps wide enough that a batch on a loaded CI host is done before the next message comes,
    // so the eager run keeps most apart: at least 4 of 8.)
    const lingering = await processedMessagesFor('5s', 8, 200);
    expect(lingering.events).toBe(80);
    expect(lingering.processedMessages).toBe(1);
    const eager = await processedMessagesFor('0', 8, 200);
    expect(eager.events).toBe(80);
    expect(eager.processedMessages).toBeGreaterThanOrEqual(4);
  });
});
