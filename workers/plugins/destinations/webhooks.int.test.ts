import { afterEach, describe, expect, it } from 'vitest';
import { startHttpSink } from '../../../test/kit/index.js';
import { WebhookSender, type Webhook } from './webhooks.js';

const SETTINGS = { connections: 4, pipelining: 1, inFlight: 3, timeoutMs: 5_000 };
const senders: WebhookSender[] = [];
afterEach(async () => {
  for (const s of senders.splice(0)) await s.close();
});

function sender(egressAllow = 'loopback'): WebhookSender {
  const s = new WebhookSender(egressAllow, SETTINGS);
  senders.push(s);
  return s;
}

const hook = (url: string, body = '{}'): Webhook => ({ url: new URL(url), method: 'POST', headers: { 'Content-Type': 'application/json' }, body });

describe('webhook thread', () => {
  it('webhooks - sent from the thread as composed, each answered in order; at most PLUGIN_WEBHOOK_IN_FLIGHT of a config at once', async () => {
    let open = 0;
    let most = 0;
    await using sink = await startHttpSink(async (r) => {
      most = Math.max(most, ++open);
      await new Promise((resolve) => setTimeout(resolve, 30));
      open--;
      return r.path === '/missing' ? 404 : 200;
    });
    const s = sender();
    const timed: number[] = [];
    s.seconds = { observe: (v) => timed.push(v) };
    const webhooks = [...Array.from({ length: 9 }, (_, i) => hook(`${sink.url}/e?i=${i}`, `{"i":${i}}`)), hook(`${sink.url}/missing`)];
    const results = await s.sendAll(1, webhooks, new AbortController().signal);
    expect(results.map((r) => ('status' in r ? r.status : r.error.name))).toEqual([...Array(9).fill(200), 404]);
    expect(sink.requests.map((r) => r.body).sort()).toEqual([...Array.from({ length: 9 }, (_, i) => `{"i":${i}}`), '{}'].sort());
    expect(sink.requests[0]!.headers['content-type']).toBe('application/json');
    expect(most).toBe(3);
    expect(timed).toHaveLength(10);
  });

  it('webhooks - large bodies go to the thread in pieces, no more than THREAD_BODY_CHARS (32 M characters) at once', async () => {
    let open = 0;
    let most = 0;
    await using sink = await startHttpSink(async () => {
      most = Math.max(most, ++open);
      await new Promise((resolve) => setTimeout(resolve, 300));
      open--;
      return 200;
    });
    const s = new WebhookSender('loopback', { ...SETTINGS, connections: 20, inFlight: 100 });
    senders.push(s);
    // Ten bodies of 5 M characters: 50 M in all, 6 of them fit the thread at once.
    const big = 'x'.repeat(5 * 1024 * 1024);
    const results = await s.sendAll(1, Array.from({ length: 10 }, (_, i) => hook(`${sink.url}/big?i=${i}`, big)), new AbortController().signal);
    expect(results.map((r) => ('status' in r ? r.status : r.error.message))).toEqual(Array(10).fill(200));
    expect(sink.requests.every((r) => r.body.length === big.length)).toBe(true);
    expect(most).toBeLessThanOrEqual(6);
  });

  it('webhooks - an address the egress policy refuses is never reached, and says why (HostOpError)', async () => {
    await using sink = await startHttpSink();
    const s = sender('');
    const [refused] = await s.sendAll(1, [hook(`${sink.url}/e`)], new AbortController().signal);
    expect(refused).toMatchObject({ error: { name: 'HostOpError', message: expect.stringMatching(/127\.0\.0\.1/) } });
    expect(sink.requests).toHaveLength(0);
  });

  it('webhooks - stopping leaves the requests not started unsent; a stopped sender sends nothing', async () => {
    await using sink = await startHttpSink((r) => (r.path === '/warm' ? 200 : new Promise((resolve) => setTimeout(() => resolve(200), 300))));
    const s = sender();
    // The thread started (its first task loads it) and a connection open.
    await s.sendAll(1, [hook(`${sink.url}/warm`)], new AbortController().signal);
    sink.requests.length = 0;
    const stop = new AbortController();
    const sending = s.sendAll(1, Array.from({ length: 9 }, (_, i) => hook(`${sink.url}/e?i=${i}`)), stop.signal);
    await new Promise((resolve) => setTimeout(resolve, 100));
    stop.abort();
    const results = await sending;
    // The three in flight were answered; the six waiting for a slot were not sent.
    expect(results.filter((r) => 'status' in r)).toHaveLength(3);
    expect(results.filter((r) => !('status' in r) && r.error.message === 'the destination was stopped')).toHaveLength(6);
    expect(sink.requests).toHaveLength(3);
    await s.close();
    expect(await s.sendAll(1, [hook(`${sink.url}/e`)], new AbortController().signal)).toEqual([{ error: { name: 'Error', message: 'the destination was stopped' } }]);
    expect(sink.requests).toHaveLength(3);
  });
});
