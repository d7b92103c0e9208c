// HTTP/1.1 pipelining (RFC 9112 §9.3): requests written at once on one connection are all
// answered, in order, and every event acknowledged is stored. uWS 20.30 closed such a
// connection without an answer (the first event was stored all the same).
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { rawConnection, rawGet, rawPost } from '../test/raw-http.js';

const KEY = 'phc_pipelining_test';
const capture = (id: string) => rawPost('/capture/', JSON.stringify({ api_key: KEY, event: 'piped', distinct_id: id }));

describe('capture pipelining', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({}, { [KEY]: 1 });
  });
  afterAll(() => h.stop());

  const storedIds = async (prefix: string) => (await h.events('events')).filter((e) => e.distinct_id.startsWith(prefix)).map((e) => e.distinct_id);

  for (const n of [1, 2, 10]) {
    it(`pipelining - ${n} POST /capture/ written at once are all answered 200 and stored`, async () => {
      const c = await rawConnection(h.url);
      const ids = Array.from({ length: n }, (_, i) => `p${n}-${i}`);
      c.write(Buffer.concat(ids.map(capture)));
      const answers = await c.answers(n);
      expect(answers.map((a) => [a.status, a.body])).toEqual(ids.map(() => [200, '{"status":1}']));
      expect((await storedIds(`p${n}-`)).sort()).toEqual([...ids].sort());
      c.close();
    });
  }

  it('pipelining - answers come in request order: a slow gzip batch, errors, GET /_health and captures mixed', async () => {
    const c = await rawConnection(h.url);
    // The first request is parsed in a thread (slow); those after it would finish first if
    // they were not answered in order.
    const bigBatch = Array.from({ length: 3000 }, (_, i) => ({ event: 'piped', distinct_id: `mix-big-${i % 50}`, properties: { i } }));
    c.write(
      Buffer.concat([
        rawPost('/batch/', gzipSync(JSON.stringify({ api_key: KEY, batch: bigBatch })), { 'Content-Encoding': 'gzip' }),
        rawGet('/_health'),
        capture('mix-a'),
        rawPost('/capture/', '{"api_key":'),
        rawPost('/capture/', JSON.stringify({ api_key: 'phc_nobody', event: 'e', distinct_id: 'x' })),
        rawGet('/_health'),
        capture('mix-b'),
      ]),
    );
    const answers = await c.answers(7);
    expect(answers.map((a) => [a.status, a.status === 200 ? a.body : (JSON.parse(a.body) as { code: string }).code])).toEqual([
      [200, '{"status":1}'],
      [200, '{"status":"ok"}'],
      [200, '{"status":1}'],
      [400, 'invalid_json'],
      [401, 'unknown_api_key'],
      [200, '{"status":"ok"}'],
      [200, '{"status":1}'],
    ]);
    const stored = await storedIds('mix-');
    expect(stored.filter((id) => id.startsWith('mix-big-'))).toHaveLength(3000);
    expect(stored.filter((id) => !id.startsWith('mix-big-')).sort()).toEqual(['mix-a', 'mix-b']);
    c.close();
  });

  it('pipelining - bodies split across writes, the next request starting in the same write as the end of one', async () => {
    const c = await rawConnection(h.url);
    const bytes = Buffer.concat([capture('split-0'), capture('split-1'), rawGet('/_health'), capture('split-2'), capture('split-3')]);
    // Cut in pieces that end mid-head, mid-body and mid-next-request.
    for (let at = 0; at < bytes.length; at += 37) {
      c.write(bytes.subarray(at, at + 37));
      await new Promise((r) => setTimeout(r, 5));
    }
    const answers = await c.answers(5);
    expect(answers.map((a) => a.body)).toEqual(['{"status":1}', '{"status":1}', '{"status":"ok"}', '{"status":1}', '{"status":1}']);
    expect((await storedIds('split-')).sort()).toEqual(['split-0', 'split-1', 'split-2', 'split-3']);
    // The connection stays usable.
    c.write(capture('split-4'));
    expect((await c.answers(6))[5]!.status).toBe(200);
    c.close();
  });

  it('pipelining - a request with Connection: close ends the connection after its answer; the ones before it are answered', async () => {
    const c = await rawConnection(h.url);
    c.write(Buffer.concat([capture('close-0'), rawPost('/capture/', JSON.stringify({ api_key: KEY, event: 'piped', distinct_id: 'close-1' }), { Connection: 'close' }), capture('close-never')]));
    const answers = await c.answers(2);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers[1]!.headers.connection).toBe('close');
    await c.closed;
    expect((await storedIds('close-')).sort()).toEqual(['close-0', 'close-1']);
  });
});
