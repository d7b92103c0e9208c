// WORKER_BATCH_CONCURRENCY: a worker processes at most that many batches at once, across all of
// its shards; the others wait for a turn, and a batch still waiting when its shard is stopped is
// left to the next owner, not lost.
import { Kvm } from '@nats-io/kv';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { shardOf } from '../../lib/index.js';
import { freshDatabase, startNats, waitFor } from '../../test/kit/index.js';
import {
  capture,
  connectAndCreateStreams,
  publishEvents,
  readProcessed,
  testDeps,
  waitForCommitted,
  workerConfig,
} from '../../test/workers/harness.js';
import { startWorker } from '../index.js';
import { WORKERS_BUCKET } from '../coordination/lease-coordinator.js';

/** Two distinct ids on different shards. */
function idsOnTwoShards(): [string, string] {
  const first = 'turn-a';
  for (let i = 0; ; i++) if (shardOf(`turn-b${i}`, 16) !== shardOf(first, 16)) return [first, `turn-b${i}`];
}

async function gauge(statusUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

describe('batch turns', () => {
  it('batch turns - with WORKER_BATCH_CONCURRENCY=1 a second shard waits while a batch is in flight; stopped while waiting, it stops at once and its batch is processed by the next worker, once', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const databaseUrl = await freshDatabase();
    const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    const [a, b] = idsOnTwoShards();

    // The first batch published is held between publish and commit until released.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held: { shard: number } | undefined;
    const first = await startWorker(
      workerConfig(nats.url, databaseUrl, { WORKER_BATCH_CONCURRENCY: '1' }),
      testDeps({
        faults: {
          afterPublish: async (info) => {
            if (held) return;
            held = { shard: info.shard };
            await released;
          },
        },
      }),
    );
    let second: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      const eventA = capture(5, 'first', a);
      await publishEvents(js, [eventA]);
      await waitFor('the first batch to be held after publishing', () => held !== undefined);
      expect(held!.shard).toBe(shardOf(a, 16));

      const eventB = capture(5, 'second', b);
      await publishEvents(js, [eventB]);
      await waitFor('the second shard to wait for its turn', async () => (await gauge(first.statusUrl, 'spate_worker_batches_waiting')) === 1);
      expect(await gauge(first.statusUrl, 'spate_worker_batches_in_flight')).toBe(1);
      // Given a turn, it would be on PROCESSED within milliseconds; it is not there a while later.
      await new Promise((r) => setTimeout(r, 300));
      expect((await readProcessed(nc)).map((l) => l.uuid)).toEqual([eventA.uuid]);

      // Stop while the batch waits. The waiting shard stops at once, without waiting for a turn
      // (its lease is freed while the held batch still holds the only turn); the held one finishes.
      const stopping = first.stop();
      const bucket = await new Kvm(nc).open(WORKERS_BUCKET);
      await waitFor('the waiting shard to be released', async () => (await bucket.get(`shards.${shardOf(b, 16)}`))?.operation !== 'PUT', 5_000);
      expect((await bucket.get(`shards.${shardOf(a, 16)}`))?.operation).toBe('PUT');
      release();
      await stopping;
      // The held batch committed; the waiting one was left untouched for the next owner.
      await waitForCommitted(db, [eventA], 5_000);
      expect((await readProcessed(nc)).map((l) => l.uuid)).toEqual([eventA.uuid]);

      second = await startWorker(workerConfig(nats.url, databaseUrl), testDeps());
      let lines: Awaited<ReturnType<typeof readProcessed>> = [];
      await waitFor('both events on PROCESSED', async () => (lines = await readProcessed(nc)).length >= 2);
      await new Promise((r) => setTimeout(r, 500));
      lines = await readProcessed(nc);
      expect(lines.map((l) => l.uuid).sort()).toEqual([eventA.uuid, eventB.uuid].sort());
    } finally {
      release();
      await first.stop();
      await second?.stop();
      await db.end();
      await nc.close();
    }
  });
});

describe('batch growth', () => {
  it('batch growth - a batch planned by the commit before it also takes what arrived while it waited: one batch, not two', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const databaseUrl = await freshDatabase();
    const id = 'grow-a';
    const shard = shardOf(id, 16);
    // The first two batches are held between publish and commit, each until released.
    const releases: (() => void)[] = [];
    const gates = [0, 1].map(() => new Promise<void>((resolve) => releases.push(resolve)));
    let held = 0;
    // Each batch's source range, as published (before its commit).
    const published: [number, number][] = [];
    const worker = await startWorker(
      workerConfig(nats.url, databaseUrl, { WORKER_BATCH_MAX_EVENTS: '2' }),
      testDeps({
        faults: {
          afterPublish: async ({ first, last }) => {
            published.push([first, last]);
            await gates[held++];
          },
        },
      }),
    );
    // Messages of the shard received and not yet processed (or still in the stream).
    const lag = async () => {
      const text = await (await fetch(`${worker.statusUrl}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('spate_worker_consumer_lag_messages{') && l.includes('stream="EVENTS"') && l.includes(`shard="${shard}"`));
      return line ? Number(line.split(' ').pop()) : NaN;
    };
    try {
      const sent = [1, 2, 3, 4, 5].map((i) => capture(5, `e${i}`, id));
      const publishOne = (e: (typeof sent)[number]) => publishEvents(js, [e], { perMessage: 1 });
      await publishOne(sent[0]!);
      await waitFor('batch 1 (e1) to be held', () => held === 1);
      for (const e of sent.slice(1, 4)) await publishOne(e);
      await waitFor('e2..e4 to be buffered', async () => (await lag()) === 3);
      releases[0]!();
      // Batch 2 is e2, e3 (two events at most) and plans the next batch as e4, the rest buffered.
      await waitFor('batch 2 to be held', () => held === 2);
      await publishOne(sent[4]!);
      await waitFor('e4, e5 to be buffered', async () => (await lag()) === 2);
      releases[1]!();

      let lines: Awaited<ReturnType<typeof readProcessed>> = [];
      await waitFor('all five on PROCESSED', async () => (lines = await readProcessed(nc)).length >= 5);
      expect(lines.map((l) => l.uuid)).toEqual(sent.map((e) => e.uuid));
      // e1 | e2 e3 | e4 e5 (stream sequences 1 to 5): the planned e4 took e5 along. Kept to its
      // plan, the third batch would have been e4 alone, and e5 would have waited for a fourth.
      await waitFor('the third batch to be published', () => published.length >= 3);
      expect(published.slice(0, 3)).toEqual([
        [1, 1],
        [2, 3],
        [4, 5],
      ]);
    } finally {
      for (const release of releases) release();
      await worker.stop();
      await nc.close();
    }
  });
});
