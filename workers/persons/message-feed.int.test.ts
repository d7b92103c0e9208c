// MessageFeed against a real nats-server 2.9: a pull whose byte budget ends short of the next
// message is answered 409 "message size exceeds maxbytes". When that was the consumer's only pull
// and nothing was queued, nats.js pulls again only after two idle heartbeats are missed (half of
// the 5 s expiry each): the shard stood still for 5-7.5 s each time. The feed now goes on with a
// new consumer from the next sequence.
import { describe, expect, it } from 'vitest';
import { startNats } from '../../test/kit/index.js';
import { connectAndCreateStreams } from '../../test/workers/harness.js';
import { MessageFeed } from './message-feed.js';

describe('message feed', () => {
  it('message feed - pulls that end short of the next message do not stall the shard for seconds', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    // Each pull asks for 64 KiB + 512 KiB + 64 KiB: two of these messages fit, a third does not.
    // Published one at a time, each after the last arrived: the pull is waiting when a message
    // that does not fit its rest comes in, so the 409 arrives alone, with nothing queued.
    const payload = new Uint8Array(250 * 1024).fill(0x61);
    const count = 6;
    let resumes = 0;
    const feed = new MessageFeed(js, {
      stream: 'EVENTS',
      filterSubject: 'events.*.0',
      startSeq: 1,
      fetchMaxBytes: 64 * 1024,
      messageMaxBytes: 512 * 1024,
      bufferMaxBytes: 64 * 1024 * 1024,
      onResume: () => resumes++,
    });
    await feed.open();
    try {
      const waits: number[] = [];
      for (let i = 0; i < count; i++) {
        await js.publish('events.1.0', payload);
        const sent = performance.now();
        let received = 0;
        while (received === 0 && performance.now() - sent < 20_000) {
          await feed.waitForMessages(1_000);
          received = feed.take({ maxEvents: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER }).length;
        }
        expect(received, `message ${i + 1}`).toBe(1);
        waits.push(Math.round(performance.now() - sent));
      }
      // Every second message after the first two meets a pull with no room left for it: the feed
      // goes on with a new consumer after 50 ms (57-66 ms in all, measured); left to nats.js, the
      // next pull went out only after two missed heartbeats (~7.5 s).
      expect(Math.max(...waits), `waits ${waits.join(', ')} ms`).toBeLessThan(1_500);
      expect(resumes).toBeGreaterThan(0);
    } finally {
      await feed.close();
      await nc.close();
    }
  });
});
