// Small batches of several shards that are ready together share one transaction (batch-turns.ts):
// at moderate rates each shard's batch is a few dozen events, and each paid for its own
// statements and commit. Each keeps its own position and PROCESSED message ids; a shared
// transaction that fails is run again batch by batch, where a poison event is found and left out.
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { shardOf, subjectFor } from '../../lib/index.js';
import { freshDatabase, startNats, waitFor } from '../../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, readProcessed, testDeps, waitForCommitted, workerConfig } from '../../test/workers/harness.js';
import { startWorker, type Worker } from '../index.js';

/** `count` distinct ids, each on a shard of its own. */
function idsOnDistinctShards(count: number): string[] {
  const ids: string[] = [];
  const shards = new Set<number>();
  for (let i = 0; ids.length < count; i++) {
    const shard = shardOf(`shared-${i}`, 16);
    if (shards.has(shard)) continue;
    shards.add(shard);
    ids.push(`shared-${i}`);
  }
  return ids;
}

/**
 * A worker on fresh NATS and PostgreSQL that has processed one event of `project` (so its first,
 * slower batch is behind it), `count` ids on shards of their own, and a one-connection pool.
 */
async function withWarmWorker(
  project: number,
  count: number,
  test: (t: { nc: NatsConnection; js: JetStreamClient; db: pg.Pool; worker: Worker; ids: string[] }) => Promise<void>,
): Promise<void> {
  await using nats = await startNats();
  const { nc, js } = await connectAndCreateStreams(nats.url);
  const databaseUrl = await freshDatabase();
  const worker = await startWorker(workerConfig(nats.url, databaseUrl), testDeps());
  const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    const ids = idsOnDistinctShards(count);
    await publishEvents(js, [capture(project, 'warm', ids[0]!)]);
    await waitFor('the first event', async () => (await readProcessed(nc)).length === 1, 30_000, 50);
    await test({ nc, js, db, worker, ids });
  } finally {
    await db.end();
    await worker.stop();
    await nc.close();
  }
}

async function histogram(worker: Worker, name: string): Promise<{ count: number; sum: number }> {
  const text = await worker.metrics.registry.metrics();
  const read = (suffix: string) => Number(new RegExp(`^${name}_${suffix}(?:\\{[^}]*\\})? (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  return { count: read('count'), sum: read('sum') };
}

describe('shared transactions', () => {
  it('shared transactions - batches of many shards ready together commit in a few transactions, each shard under its own PROCESSED ids', async () => {
    await withWarmWorker(4, 12, async ({ nc, js, db, worker, ids }) => {
      const before = await histogram(worker, 'spate_worker_transaction_batches');
      // One message per shard, all at once: as one capture request of 12 users is published.
      const events = ids.map((id) => capture(4, 'step', id, { $set: { at: id } }));
      await publishEvents(js, events);
      await waitForCommitted(db, events);
      const after = await histogram(worker, 'spate_worker_transaction_batches');
      const transactions = after.count - before.count;
      const batches = after.sum - before.sum;
      expect(batches).toBe(12);
      // WORKER_BATCH_CONCURRENCY (4) turns: alone, 12 transactions.
      expect(transactions).toBeLessThanOrEqual(4);
      const lines = (await readProcessed(nc)).filter((l) => l.event === 'step');
      expect(lines.map((l) => l.uuid).sort()).toEqual(events.map((e) => e.uuid).sort());
      for (const l of lines) {
        const shard = shardOf(l.distinct_id, 16);
        expect(l.subject).toBe(subjectFor('processed', 4, shard));
        expect(l.msgId.startsWith(`EVENTS:${shard}:4:`)).toBe(true);
      }
      const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM persons WHERE properties ? 'at'");
      expect(rows[0]!.n).toBe(12);
    });
  });

  it('shared transactions - a poison event fails the shared transaction: each batch runs alone, the poison event is left out and every other event processed once', async () => {
    await withWarmWorker(6, 8, async ({ nc, js, db, worker, ids }) => {
      const good = ids.slice(1).map((id) => capture(6, 'step', id));
      // $set nested ~5,000 levels: JSON.stringify cannot write it back (RangeError), every time.
      const poison = capture(6, 'deep', ids[0]!, { $set: { nested: '__DEEP__' } });
      const deep = `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
      const h = headers();
      h.set('Spate-Events', '1');
      await Promise.all([
        publishEvents(js, good),
        js.publish(subjectFor('events', 6, shardOf(ids[0]!, 16)), new TextEncoder().encode(`${JSON.stringify(poison).replace('"__DEEP__"', deep)}\n`), { msgID: `shared-poison-${process.pid}`, headers: h }),
      ]);
      await waitForCommitted(db, [...good, poison]);
      const lines = (await readProcessed(nc)).filter((l) => l.event !== 'warm');
      expect(lines.map((l) => l.uuid).sort()).toEqual(good.map((e) => e.uuid).sort());
      const { rows } = await db.query<{ details: { eventUuid: string } }>("SELECT details FROM ingestion_warnings WHERE project_id = 6 AND type = 'event_processing_failed'");
      expect(rows.map((r) => r.details.eventUuid)).toEqual([poison.uuid]);
      // The poison batch was in a shared transaction, and every batch of it ran again alone.
      const text = await worker.metrics.registry.metrics();
      expect(Number(/^spate_worker_batch_retries_total\{[^}]*reason="shared"[^}]*\} (\d+)$/m.exec(text)?.[1] ?? 0)).toBeGreaterThanOrEqual(2);
    });
  });
});
