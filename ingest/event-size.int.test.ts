// The largest event capture stores, against a NATS server whose max_payload is NATS's own default
// (1 MiB): what it answers 200 for must still fit one PROCESSED message once a worker added
// person_id and $group_N (ingest/message-size.ts), so the line may be 1,035,429 bytes, not the
// 1,047,551 the server alone would take; a byte more is answered 413 and nothing is stored. A
// server that leaves no room at all stops an ingest node's start.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, silentLog, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { startNats } from '../test/kit/index.js';
import { loadIngestConfig, startIngest } from './index.js';
import { HEADER_ALLOWANCE, PROCESSING_ALLOWANCE } from './message-size.js';

const KEY = 'phc_event_size_test';
const MIB = 1024 * 1024;
/** The longest captured line (without its newline) with a 1 MiB server. */
const LARGEST_LINE = MIB - HEADER_ALLOWANCE - PROCESSING_ALLOWANCE - 1;

describe('event size', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({}, { [KEY]: 1 }, { maxPayload: MIB });
  });
  afterAll(() => h.stop());

  /** An event of fixed-length fields but `pad`, so its captured line grows byte for byte with it. */
  const event = (n: number, pad: string) => ({
    api_key: KEY,
    event: 'sized',
    distinct_id: 'sized-user',
    uuid: `0190a7a0-0000-7000-8000-${String(n).padStart(12, '0')}`,
    timestamp: '2026-11-28T00:00:00.000Z',
    properties: { pad },
  });
  const storedLine = async (uuid: string) => {
    const stored = (await h.events('events')).find((e) => e.uuid === uuid);
    return stored && Buffer.byteLength(JSON.stringify(stored));
  };

  it('event size - with a 1 MiB server, a line of 1,035,429 bytes is stored; one of a byte more gets 413 event_too_large', async () => {
    expect(LARGEST_LINE).toBe(1_035_429);
    const probe = event(1, '');
    expect((await post(`${h.url}/capture/`, JSON.stringify(probe))).status).toBe(200);
    const base = (await storedLine(probe.uuid))!;

    const largest = event(2, 'x'.repeat(LARGEST_LINE - base));
    expect((await post(`${h.url}/capture/`, JSON.stringify(largest))).status).toBe(200);
    expect(await storedLine(largest.uuid)).toBe(LARGEST_LINE);

    const over = event(3, 'x'.repeat(LARGEST_LINE - base + 1));
    const res = await post(`${h.url}/capture/`, JSON.stringify(over));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: 'event_too_large' });
    expect(await storedLine(over.uuid)).toBeUndefined();
  });
});

describe('event size, a server with no room for events', () => {
  it('event size - an ingest node refuses to start against a max_payload that leaves no room for an event, and says the least it needs', async () => {
    await using nats = await startNats({ maxPayload: 8 * 1024 });
    await expect(startIngest(loadIngestConfig({ ...nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1' }), { log: silentLog })).rejects.toThrow(
      `the NATS server's max_payload of 8192 bytes leaves no room for events: it must be at least ${HEADER_ALLOWANCE + PROCESSING_ALLOWANCE + 1024}`,
    );
  });

});
