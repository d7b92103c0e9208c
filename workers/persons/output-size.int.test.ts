// A batch whose processed output fills PROCESSED messages to the last bytes: the packer must leave
// room for each message's headers (Nats-Msg-Id, Spate-Events), or the piece is refused as too large
// after it was packed and the poison search leaves out an innocent event. Reachable without plugins:
// events whose `$groups` carry long keys grow by ~900 bytes each when the worker adds `$group_N`.
// And the largest line ingest takes must still fit one PROCESSED message once it grew.
import type { JetStreamClient } from '@nats-io/jetstream';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { CapturedEvent, NatsConnection } from '../../lib/index.js';
import { messageSizeLimit } from '../../ingest/message-size.js';
import { freshDatabase, startNats, waitFor } from '../../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, readProcessed, testDeps, waitForCommitted, workerConfig } from '../../test/workers/harness.js';
import { startWorker } from '../index.js';

const MAX_PAYLOAD = 256 * 1024;
const PER_MESSAGE = 100;
const KEY = (c: string) => c.repeat(400); // MAX_GROUP_KEY_LENGTH

/** An event whose processed line is `pad` bytes longer than the shortest one (same-length fields throughout). */
const grouped = (distinctId: string, pad: number) =>
  capture(41, 'grouped', distinctId, { $groups: { company: KEY('c'), team: KEY('t') }, pad: 'x'.repeat(pad) });

/** The length of the processed line of `event` as published (without its newline). */
async function processedLength(nc: NatsConnection, uuid: string): Promise<number> {
  let length = 0;
  await waitFor(
    'the calibration event on PROCESSED',
    async () => {
      const line = (await readProcessed(nc)).find((l) => l.uuid === uuid);
      if (line) {
        const { subject: _s, msgId: _m, ...event } = line;
        length = Buffer.byteLength(JSON.stringify(event));
      }
      return line !== undefined;
    },
    15_000,
    50,
  );
  return length;
}

/** All of `events` in one EVENTS message, so that one batch holds them. */
async function publish(js: JetStreamClient, events: readonly CapturedEvent[]): Promise<void> {
  await publishEvents(js, events, { perMessage: events.length });
}

/**
 * A NATS server of MAX_PAYLOAD with the streams, a fresh database and a pool on it, and a worker
 * (started again by `restart`); everything stopped when disposed.
 */
async function pipeline() {
  const nats = await startNats({ maxPayload: MAX_PAYLOAD });
  const { nc, js } = await connectAndCreateStreams(nats.url);
  const databaseUrl = await freshDatabase();
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const start = () => startWorker(workerConfig(nats.url, databaseUrl), testDeps());
  let worker = await start();
  return {
    nc,
    js,
    db,
    stopWorker: () => worker.stop(),
    restartWorker: async () => void (worker = await start()),
    /** Events of `projectId` left out as poison (none is expected). */
    leftOut: async (projectId: number) =>
      (await db.query("SELECT details FROM ingestion_warnings WHERE project_id = $1 AND type = 'event_processing_failed'", [projectId])).rows,
    async [Symbol.asyncDispose]() {
      await worker.stop();
      await db.end();
      await nc.close();
      await nats[Symbol.asyncDispose]();
    },
  };
}

describe('PROCESSED message size', () => {
  it('output size - a batch whose output fills a PROCESSED message to within its headers is processed whole; no event is isolated', async () => {
    await using p = await pipeline();
    const { nc, js, db } = p;
    // Calibrate: the processed line of an event of this shape, with no padding.
    const probe = grouped('sized-user', 0);
    await publish(js, [probe]);
    const base = await processedLength(nc, probe.uuid);
    await p.stopWorker();

    // Pad so that PER_MESSAGE lines (each with its newline) come within 60 bytes of the max payload:
    // room for the body, none for the headers (~60 bytes and the id). More follow, so the packer must cut.
    const pad = Math.floor(MAX_PAYLOAD / PER_MESSAGE) - 1 - base;
    const lineBytes = base + pad + 1;
    expect(MAX_PAYLOAD - PER_MESSAGE * lineBytes).toBeLessThan(60);
    const events = Array.from({ length: PER_MESSAGE + 5 }, () => grouped('sized-user', pad));
    await publish(js, events);
    await p.restartWorker();

    await waitForCommitted(db, events, 20_000);
    const lines = await readProcessed(nc);
    const wanted = new Set(events.map((e) => e.uuid));
    const seen = lines.filter((l) => wanted.has(l.uuid));
    expect(seen.length).toBe(events.length);
    expect(new Set(seen.map((l) => l.uuid)).size).toBe(events.length);
    // One batch, cut into two messages: 100 lines and their headers do not fit one.
    expect(new Set(seen.map((l) => l.msgId)).size).toBe(2);
    // Each processed event carries both groups: the output really grew past what was planned.
    expect(seen.every((l) => typeof l.properties.$group_0 === 'string' && typeof l.properties.$group_1 === 'string')).toBe(true);
    expect(await p.leftOut(41)).toEqual([]);
  });

  it('output size - the largest line ingest takes, grown by five $group_N of 400 escaped characters, is published processed', async () => {
    await using p = await pipeline();
    const { nc, js, db } = p;
    // Ingest's limit counts the line with its newline (line-packer.ts), whatever PUBLISH_MAX_MESSAGE_BYTES says.
    const largestLine = messageSizeLimit(Number.MAX_SAFE_INTEGER, MAX_PAYLOAD) - 1;
    // Control characters are written as 6-byte escapes: each key grows the line by ~2.4 KB as `$group_N`.
    const $groups = Object.fromEntries(['company', 'team', 'shop', 'club', 'band'].map((type, i) => [type, `${i}${'\u0001'.repeat(399)}`]));
    const event = capture(42, 'grouped', 'largest-user', { $groups, pad: '' });
    event.properties.pad = 'x'.repeat(largestLine - Buffer.byteLength(JSON.stringify(event)));
    expect(Buffer.byteLength(JSON.stringify(event))).toBe(largestLine);
    await publish(js, [event]);

    await waitForCommitted(db, [event], 20_000);
    const line = (await readProcessed(nc)).find((l) => l.uuid === event.uuid);
    expect(line?.properties).toMatchObject({ $group_0: $groups.company, $group_1: $groups.team, $group_2: $groups.shop, $group_3: $groups.club, $group_4: $groups.band });
    expect(await p.leftOut(42)).toEqual([]);
  });
});
