// Poison events never stop a shard (issue 16): an event that fails processing every time is left
// out and reported, the rest of its batch and everything after it is processed within seconds;
// failures of the moment are still retried, and nothing is lost or left out for them.
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { shardOf, subjectFor, type CapturedEvent, type NatsConnection } from '../../lib/index.js';
import { freshDatabase, startNats, startPostgres, waitFor } from '../../test/kit/index.js';
import {
  capture,
  connectAndCreateStreams,
  publishEvents,
  readProcessed,
  testDeps,
  waitForCommitted,
  workerConfig,
  type ProcessedLine,
} from '../../test/workers/harness.js';
import { startWorker, type Worker } from '../index.js';

const SHARDS = 16;

/** `count` distinct ids that all hash to the shard of `first`. */
function idsOnOneShard(first: string, count: number): string[] {
  const shard = shardOf(first, SHARDS);
  const ids = [first];
  for (let i = 0; ids.length < count; i++) if (shardOf(`${first}-${i}`, SHARDS) === shard) ids.push(`${first}-${i}`);
  return ids;
}

let published = 0;

/** One message of raw NDJSON lines on the subject of `distinctId`, as a worker input (not through capture). */
async function publishLines(js: JetStreamClient, projectId: number, distinctId: string, lines: string[]): Promise<void> {
  const h = headers();
  h.set('Spate-Events', String(lines.length));
  await js.publish(subjectFor('events', projectId, shardOf(distinctId, SHARDS)), new TextEncoder().encode(`${lines.join('\n')}\n`), {
    msgID: `poison-test-${process.pid}-${++published}`,
    headers: h,
  });
}

/** A captured line whose `$set` is nested `depth` levels deep (JSON.stringify cannot write it back: ~4k levels). */
function deepSetEvent(projectId: number, distinctId: string, depth: number): { event: CapturedEvent; line: string } {
  const event = capture(projectId, 'deep', distinctId, { $set: { nested: '__DEEP__' } });
  const deep = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  return { event, line: JSON.stringify(event).replace('"__DEEP__"', deep) };
}

async function metric(worker: Worker, name: string, label = ''): Promise<number> {
  const text = await worker.metrics.registry.metrics();
  const m = new RegExp(`^${name}${label ? `\\{[^}]*${label}[^}]*\\}` : '(?:\\{[^}]*\\})?'} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

async function warnings(db: pg.Pool, projectId: number, type: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query<{ details: Record<string, unknown> }>(
    'SELECT details FROM ingestion_warnings WHERE project_id = $1 AND type = $2 ORDER BY id',
    [projectId, type],
  );
  return rows.map((r) => r.details);
}

/** Waits until PROCESSED holds every one of `events`; returns all lines and how long it took. */
async function waitForUuids(nc: NatsConnection, events: readonly CapturedEvent[], timeoutMs: number): Promise<{ lines: ProcessedLine[]; ms: number }> {
  const started = performance.now();
  const want = new Set(events.map((e) => e.uuid));
  let lines: ProcessedLine[] = [];
  await waitFor(
    `${want.size} events on PROCESSED`,
    async () => {
      lines = await readProcessed(nc);
      const seen = new Set(lines.map((l) => l.uuid));
      return [...want].every((u) => seen.has(u));
    },
    timeoutMs,
    50,
  );
  return { lines, ms: performance.now() - started };
}

function expectOnce(lines: readonly ProcessedLine[], events: readonly CapturedEvent[]): void {
  const counts = new Map<string, number>();
  for (const l of lines) counts.set(l.uuid, (counts.get(l.uuid) ?? 0) + 1);
  expect(events.filter((e) => counts.get(e.uuid) !== 1).map((e) => [e.event, counts.get(e.uuid) ?? 0])).toEqual([]);
}

async function withWorker(
  env: Record<string, string>,
  body: (w: { worker: Worker; nc: NatsConnection; js: JetStreamClient; db: pg.Pool }) => Promise<void>,
): Promise<void> {
  await using nats = await startNats();
  const { nc, js } = await connectAndCreateStreams(nats.url);
  const databaseUrl = await freshDatabase();
  const worker = await startWorker(workerConfig(nats.url, databaseUrl, env), testDeps());
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  try {
    await body({ worker, nc, js, db });
  } finally {
    await worker.stop();
    await db.end();
    await nc.close();
  }
}

describe('poison events', () => {
  it('poison - a 5,000-deep $set is left out and reported; the rest of its batch and the events after it reach PROCESSED within 10 s', async () => {
    await withWorker({}, async ({ worker, nc, js, db }) => {
      const [attacker, ...victims] = idsOnOneShard('attacker', 4);
      const before = capture(21, 'before', victims[0]!);
      const poison = deepSetEvent(21, attacker!, 5_000);
      const besides = capture(21, 'besides', victims[1]!, { $set: { plan: 'pro' } });
      // One message, so one batch: the poison sits between two ordinary events.
      await publishLines(js, 21, attacker!, [JSON.stringify(before), poison.line, JSON.stringify(besides)]);
      const after = victims.map((id, i) => capture(21, 'after', id, { i }));
      const sentAt = performance.now();
      await publishEvents(js, after, { perMessage: 1 });

      const { lines } = await waitForUuids(nc, [before, besides, ...after], 10_000);
      expect(performance.now() - sentAt).toBeLessThan(10_000);
      expectOnce(lines, [before, besides, ...after]);
      expect(lines.some((l) => l.uuid === poison.event.uuid)).toBe(false);
      await waitForCommitted(db, [before, besides, ...after, poison.event]);

      const failed = await warnings(db, 21, 'event_processing_failed');
      expect(failed).toEqual([expect.objectContaining({ eventUuid: poison.event.uuid, event: 'deep', distinctId: attacker })]);
      expect(String(failed[0]!.reason)).toMatch(/RangeError: Maximum call stack size exceeded/);
      expect(await metric(worker, 'spate_worker_events_processed_total', 'kind="failed"')).toBe(1);
      expect(await metric(worker, 'spate_worker_isolation_trials_total')).toBeGreaterThan(0);
      // The event beside it in the same batch took effect; the poison's own update did not.
      const { rows } = await db.query(
        `SELECT d.distinct_id, p.properties FROM person_distinct_ids d JOIN persons p ON p.uuid = d.person_uuid
          WHERE d.project_id = 21 AND d.distinct_id = ANY($1) ORDER BY d.distinct_id`,
        [[attacker, victims[1]]],
      );
      expect(rows).toEqual([{ distinct_id: victims[1], properties: { plan: 'pro' } }]);
    });
  });

  it('poison - an event PostgreSQL refuses every time (SQLSTATE 22008, a timestamp it cannot store) is left out; a group write it breaks fails no other batch', async () => {
    await withWorker({}, async ({ worker, nc, js, db }) => {
      const [known, fresh, other] = idsOnOneShard('refused', 3);
      const year0 = '0000-01-01T00:00:00.000Z';
      const first = capture(22, 'first', known!);
      await publishEvents(js, [first]);
      await waitForUuids(nc, [first], 10_000);

      // A new person's created_at: refused inside the batch transaction.
      const personPoison = capture(22, 'year zero', fresh!, {}, { timestamp: year0 });
      // A group's created_at: refused by the group write, which runs beside the publish.
      const groupPoison = capture(22, '$groupidentify', known!, { $group_type: 'company', $group_key: 'acme', $group_set: { n: 1 } }, { timestamp: year0 });
      const ok = [capture(22, 'ok', other!), capture(22, 'ok', known!), capture(22, '$groupidentify', other!, { $group_type: 'company', $group_key: 'beta', $group_set: { n: 2 } })];
      await publishLines(js, 22, known!, [personPoison, ok[0]!, groupPoison, ok[1]!, ok[2]!].map((e) => JSON.stringify(e)));
      const after = [capture(22, 'after', known!), capture(22, 'after', fresh!)];
      const sentAt = performance.now();
      await publishEvents(js, after, { perMessage: 1 });

      const { lines } = await waitForUuids(nc, [...ok, ...after], 10_000);
      expect(performance.now() - sentAt).toBeLessThan(10_000);
      expectOnce(lines, [first, ...ok, ...after]);
      // Refused before anything of its batch was published: not on PROCESSED.
      expect(lines.some((l) => l.uuid === personPoison.uuid)).toBe(false);
      // Refused by the group write, which runs while the batch is published: on PROCESSED at most once.
      expect(lines.filter((l) => l.uuid === groupPoison.uuid).length).toBeLessThanOrEqual(1);
      await waitForCommitted(db, [first, ...ok, ...after, personPoison, groupPoison]);

      const failed = await warnings(db, 22, 'event_processing_failed');
      expect(failed.map((w) => w.eventUuid).sort()).toEqual([personPoison.uuid, groupPoison.uuid].sort());
      for (const w of failed) expect(String(w.reason)).toMatch(/SQLSTATE 22008/);
      expect(await metric(worker, 'spate_worker_events_processed_total', 'kind="failed"')).toBe(2);
      const { rows: groups } = await db.query('SELECT group_key, group_properties FROM groups WHERE project_id = 22 ORDER BY group_key');
      expect(groups).toEqual([{ group_key: 'beta', group_properties: { n: 2 } }]);
      const { rows: persons } = await db.query(
        `SELECT d.distinct_id, p.created_at FROM person_distinct_ids d JOIN persons p ON p.uuid = d.person_uuid WHERE d.project_id = 22 AND d.distinct_id = $1`,
        [fresh],
      );
      // Created by the ordinary event after the poison, with that event's time.
      expect(persons).toHaveLength(1);
      expect((persons[0].created_at as Date).getUTCFullYear()).toBeGreaterThan(2000);
    });
  });

  it('poison - failures of the moment (PostgreSQL restarted, connections killed) are retried: nothing is left out, lost or processed twice', async () => {
    await using nats = await startNats();
    await using postgres = await startPostgres();
    const databaseUrl = await postgres.createDatabase();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const worker = await startWorker(workerConfig(nats.url, databaseUrl, { WORKER_BATCH_MAX_EVENTS: '200' }), testDeps());
    const admin = new pg.Client({ connectionString: postgres.url });
    try {
      const sent: CapturedEvent[] = [];
      const batchOf = (from: number) =>
        Array.from({ length: 3_000 }, (_, i) =>
          i % 7 === 0
            ? capture(23, '$identify', `u-${(from + i) % 150}`, { $set: { n: from + i } })
            : i % 11 === 0
              ? capture(23, '$groupidentify', `u-${(from + i) % 150}`, { $group_type: 'org', $group_key: `o${i % 4}`, $group_set: { n: i } })
              : capture(23, 'clicked', `u-${(from + i) % 150}`, { i: from + i }),
        );
      sent.push(...batchOf(0));
      await publishEvents(js, sent, { perMessage: 20 });
      await waitFor('processing under way', async () => (await readProcessed(nc)).length > 0, 20_000, 50);
      await postgres.server.restart();
      const more = batchOf(3_000);
      sent.push(...more);
      await publishEvents(js, more, { perMessage: 20 });
      await admin.connect();
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 150));
        await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'spate-worker'");
      }
      const { lines } = await waitForUuids(nc, sent, 90_000);
      await new Promise((r) => setTimeout(r, 500));
      expectOnce(await readProcessed(nc), sent);
      expect(lines.length).toBeGreaterThanOrEqual(sent.length);
      expect(await metric(worker, 'spate_worker_batch_retries_total', 'reason="unavailable"')).toBeGreaterThan(0);
      expect(await metric(worker, 'spate_worker_events_processed_total', 'kind="failed"')).toBe(0);
      expect(await metric(worker, 'spate_worker_isolation_trials_total')).toBe(0);
      const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
      await waitForCommitted(db, sent);
      expect(await warnings(db, 23, 'event_processing_failed')).toEqual([]);
      await db.end();
    } finally {
      await admin.end().catch(() => undefined);
      await worker.stop();
      await nc.close();
    }
  });

  it('properties size cap - a person or group update past WORKER_MAX_PROPERTIES_BYTES is refused with a warning and not stored; its event is processed and the shard goes on', async () => {
    await withWorker({ WORKER_MAX_PROPERTIES_BYTES: '2KiB' }, async ({ worker, nc, js, db }) => {
      const [user, other] = idsOnOneShard('capped', 2);
      const x = (n: number) => 'x'.repeat(n);
      const first = [
        capture(24, 'set', user!, { $set: { a: x(500) } }),
        capture(24, 'too big', user!, { $set: { b: x(3_000) } }),
        capture(24, 'set', user!, { $set: { c: x(500) } }),
        capture(24, '$groupidentify', user!, { $group_type: 'company', $group_key: 'big', $group_set: { name: x(3_000) } }),
        capture(24, '$groupidentify', user!, { $group_type: 'company', $group_key: 'grows', $group_set: { a: x(1_200) } }),
      ];
      await publishEvents(js, first, { perMessage: first.length });
      const { lines } = await waitForUuids(nc, first, 10_000);
      expectOnce(lines, first);
      await waitForCommitted(db, first);
      // A later batch: the person's size comes from what is stored; the group's merge is checked where it is made.
      const second = [
        capture(24, 'too big later', user!, { $set: { d: x(1_200) } }),
        capture(24, '$groupidentify', user!, { $group_type: 'company', $group_key: 'grows', $group_set: { b: x(1_200) } }),
        capture(24, 'after', other!),
      ];
      await publishEvents(js, second, { perMessage: second.length });
      await waitForUuids(nc, second, 10_000);
      await waitForCommitted(db, second);

      const { rows: persons } = await db.query(
        `SELECT p.properties FROM person_distinct_ids d JOIN persons p ON p.uuid = d.person_uuid WHERE d.project_id = 24 AND d.distinct_id = $1`,
        [user],
      );
      expect(persons[0].properties).toEqual({ a: x(500), c: x(500) });
      const { rows: groups } = await db.query('SELECT group_key, group_properties FROM groups WHERE project_id = 24 ORDER BY group_key');
      expect(groups).toEqual([
        { group_key: 'big', group_properties: {} },
        { group_key: 'grows', group_properties: { a: x(1_200) } },
      ]);
      const personWarnings = await warnings(db, 24, 'person_properties_too_large');
      expect(personWarnings.map((w) => [w.eventUuid, w.maxBytes])).toEqual([
        [first[1]!.uuid, 2048],
        [second[0]!.uuid, 2048],
      ]);
      for (const w of personWarnings) expect(w.bytes).toBeGreaterThan(2048);
      const groupWarnings = await warnings(db, 24, 'group_properties_too_large');
      expect(groupWarnings.map((w) => w.groupKey)).toEqual(['big', 'grows']);
      expect(await metric(worker, 'spate_worker_ingestion_warnings_total', 'type="person_properties_too_large"')).toBe(2);
      expect(await metric(worker, 'spate_worker_events_processed_total', 'kind="failed"')).toBe(0);
    });
  });
});
