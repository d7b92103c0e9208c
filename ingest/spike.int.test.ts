// Spike detection with its real defaults (SPIKE_EVENTS_PER_SECOND 100, SPIKE_BURST 1000): a
// distinct_id is let through while it has tokens, charged in full, and diverted to OVERFLOW
// while in debt (until the refill has paid for what was let through).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf, subjectFor } from '../lib/index.js';
import { post, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

const KEY = 'phc_spike_test';
const PROJECT = 9;

describe('spike detection', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({}, { [KEY]: PROJECT });
  });
  afterAll(() => h.stop());

  const send = async (distinctId: string, n: number, tag: string) => {
    const batch = Array.from({ length: n }, (_, i) => ({ event: `${tag}-${i}`, distinct_id: distinctId }));
    expect((await post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch }))).status).toBe(200);
  };
  const stored = async (stream: 'events' | 'overflow', distinctId: string, tag: string) =>
    (await h.messages(stream))
      .flatMap((m) => m.events.map((e) => ({ subject: m.subject, e })))
      .filter(({ e }) => e.distinct_id === distinctId && e.event.startsWith(`${tag}-`));

  it('spike - a new distinct_id sending 1,001 events in one request lands on EVENTS, none diverted', async () => {
    await send('new-1001', 1001, 'first');
    const realtime = await stored('events', 'new-1001', 'first');
    expect(realtime).toHaveLength(1001);
    for (const { subject } of realtime) expect(subject).toBe(subjectFor('events', PROJECT, shardOf('new-1001', 16)));
    expect(await stored('overflow', 'new-1001', 'first')).toHaveLength(0);
  });

  it('spike - after a request past its burst, the id goes to OVERFLOW until it has refilled', async () => {
    await send('deep', 2500, 'a'); // let through whole: 1,000 tokens left, balance −1,500 (15 s at 100/s)
    expect(await stored('events', 'deep', 'a')).toHaveLength(2500);
    await send('deep', 10, 'b');
    await send('deep', 10, 'c');
    expect(await stored('overflow', 'deep', 'b')).toHaveLength(10);
    expect(await stored('overflow', 'deep', 'c')).toHaveLength(10);
    for (const { subject } of await stored('overflow', 'deep', 'b')) expect(subject).toBe(subjectFor('overflow', PROJECT, shardOf('deep', 16)));
  });

  it('spike - diverted events cost nothing: an id in small debt is back on EVENTS once refilled', async () => {
    await send('shallow', 1010, 'a'); // balance −10: 0.1 s at 100/s
    await send('shallow', 10, 'b');
    await new Promise((r) => setTimeout(r, 300));
    await send('shallow', 10, 'c');
    expect(await stored('events', 'shallow', 'c')).toHaveLength(10);
    expect(await stored('overflow', 'shallow', 'c')).toHaveLength(0);
  });
});
