// Headers alone must not hold the in-flight budget: a request that declares 20 MiB and sends
// nothing used to reserve all of it at once, so a few such connections made every ordinary
// multi-megabyte batch get 503. Bytes are now taken as they arrive, a body has BODY_TIMEOUT to
// arrive (then 408), and one client address may send MAX_UPLOADS_PER_CLIENT bodies at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { waitFor } from '../test/kit/index.js';
import { rawConnection, rawPost, type RawConnection } from '../test/raw-http.js';

const KEY = 'phc_slow_bodies_test';
const MiB = 1024 * 1024;

/** A ~5 MiB batch: more than the budget leaves beside three 20 MiB reservations of 64 MiB. */
function batch(tag: string): string {
  const events = Array.from({ length: 5000 }, (_, i) => ({ event: 'normal', distinct_id: `${tag}-${i % 20}`, properties: { pad: 'p'.repeat(1000) } }));
  return JSON.stringify({ api_key: KEY, batch: events });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe('slow and empty bodies', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({ INFLIGHT_BUDGET_BYTES: '64MiB', BODY_TIMEOUT: '4s', MAX_UPLOADS_PER_CLIENT: '16' }, { [KEY]: 1 });
  });
  afterAll(() => h.stop());

  /** Ordinary clients: 6 batches, 2 at a time; every status and each request's latency. */
  async function normalTraffic(tag: string): Promise<{ statuses: number[]; latencies: number[] }> {
    const statuses: number[] = [];
    const latencies: number[] = [];
    for (let round = 0; round < 3; round++) {
      await Promise.all(
        [0, 1].map(async (lane) => {
          const started = performance.now();
          const res = await post(`${h.url}/batch/`, batch(`${tag}-${round}-${lane}`));
          latencies.push(performance.now() - started);
          statuses.push(res.status);
          await res.arrayBuffer();
        }),
      );
    }
    return { statuses, latencies };
  }

  it('slow bodies - 50 connections declaring 20 MiB and sending nothing: normal clients keep getting 200 at their usual latency', async () => {
    const quiet = await normalTraffic('quiet');
    expect(quiet.statuses).toEqual([200, 200, 200, 200, 200, 200]);

    // The attackers come from another address (127.0.0.2), as they would in real life.
    const attackers: RawConnection[] = [];
    for (let i = 0; i < 50; i++) {
      const c = await rawConnection(h.url, '127.0.0.2');
      c.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Length: ${20 * MiB}\r\n\r\n`);
      attackers.push(c);
    }
    // Past MAX_UPLOADS_PER_CLIENT (16) they are refused at once; the 16 let in hold no budget.
    const refused = await Promise.all(attackers.slice(16).map((c) => c.answers(1)));
    expect(refused.map(([a]) => a!.status)).toEqual(Array.from({ length: 34 }, () => 429));
    expect(JSON.parse(refused[0]![0]!.body)).toMatchObject({ code: 'too_many_uploads' });
    expect(await h.metric('spate_ingest_inflight_bytes')).toBeLessThan(MiB);

    const attacked = await normalTraffic('attacked');
    expect(attacked.statuses).toEqual([200, 200, 200, 200, 200, 200]);
    // Same clients, same run: the attack does not slow them down beyond noise.
    expect(median(attacked.latencies)).toBeLessThan(3 * median(quiet.latencies) + 250);
    expect((await h.events('events')).filter((e) => e.event === 'normal')).toHaveLength(12 * 5000);

    // The 16 let in never send their body: BODY_TIMEOUT answers each 408 and frees its slot.
    const timedOut = await Promise.all(attackers.slice(0, 16).map((c) => c.answers(1, 15_000)));
    expect(timedOut.map(([a]) => a!.status)).toEqual(Array.from({ length: 16 }, () => 408));
    expect(JSON.parse(timedOut[0]![0]!.body)).toMatchObject({ code: 'body_timeout' });
    await waitFor('attacker connections closed', () => Promise.resolve(attackers.every((c) => c.socket.destroyed)));
    const again = await rawConnection(h.url, '127.0.0.2');
    again.write(rawPost('/capture/', JSON.stringify({ api_key: KEY, event: 'after', distinct_id: 'x' })));
    expect((await again.answers(1))[0]!.status).toBe(200);
    again.close();
  });

  it('slow bodies - a body that trickles in slower than BODY_TIMEOUT gets 408 and its bytes are released', async () => {
    const c = await rawConnection(h.url, '127.0.0.3');
    c.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Length: ${2 * MiB}\r\n\r\n`);
    c.write(Buffer.alloc(MiB, 0x20));
    await waitFor('1 MiB held', async () => (await h.metric('spate_ingest_inflight_bytes')) >= MiB);
    const timer = setInterval(() => c.write(' '), 500);
    try {
      const [answer] = await c.answers(1, 15_000);
      expect(answer!.status).toBe(408);
    } finally {
      clearInterval(timer);
    }
    await waitFor('bytes released', async () => (await h.metric('spate_ingest_inflight_bytes')) === 0);
    c.close();
  });
});
