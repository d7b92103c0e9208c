// The publisher's ordering and failure rules, with a JetStream stand-in whose acks the test
// controls (the real thing is exercised by the integration tests).
import type { JetStreamClient } from '@nats-io/jetstream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CaptureError } from '../errors.js';
import { createIngestMetrics } from '../metrics.js';
import { EventPublisher } from './publisher.js';

interface Sent {
  subject: string;
  text: string;
  msgID: string;
  settle: (ok: boolean) => void;
}

function fakeJetStream() {
  const sent: Sent[] = [];
  const js = {
    publish: (subject: string, data: Uint8Array, opts: { msgID: string }) =>
      new Promise((resolve, reject) => {
        sent.push({
          subject,
          text: Buffer.from(data).toString(),
          msgID: opts.msgID,
          settle: (ok) => (ok ? resolve({ stream: 'EVENTS', seq: sent.length, duplicate: false }) : reject(new Error('no PubAck'))),
        });
      }),
  } as unknown as JetStreamClient;
  return { js, sent };
}

const tick = () => new Promise((r) => setImmediate(r));
const item = (subject: string, text: string) => ({ subject, data: Buffer.from(text), count: 1 });

function publisher(js: JetStreamClient, attempts = 1) {
  return new EventPublisher(js, { maxMessageBytes: 1024, maxInflightPerSubject: 1, ackTimeoutMs: 1000, attempts, retryAfterSeconds: 1 }, createIngestMetrics(), pino({ level: 'silent' }));
}

describe('publisher', () => {
  it('publisher - one message in flight per subject; what arrives meanwhile goes in the next message, in order', async () => {
    const { js, sent } = fakeJetStream();
    const p = publisher(js);
    const a = p.publish([item('events.1.0', 'a\n')]);
    await tick();
    const b = p.publish([item('events.1.0', 'b\n')]);
    const c = p.publish([item('events.1.0', 'c\n'), item('events.1.1', 'x\n')]);
    await tick();
    expect(sent.map((s) => [s.subject, s.text])).toEqual([
      ['events.1.0', 'a\n'],
      ['events.1.1', 'x\n'], // another subject does not wait
    ]);
    sent[0]!.settle(true);
    await a;
    await tick();
    expect(sent[2]).toMatchObject({ subject: 'events.1.0', text: 'b\nc\n' });
    sent[1]!.settle(true);
    sent[2]!.settle(true);
    await Promise.all([b, c]);
    expect(new Set(sent.map((s) => s.msgID)).size).toBe(3);
  });

  it('publisher - a retry reuses the message id, and a request is answered only when all its messages are stored', async () => {
    const { js, sent } = fakeJetStream();
    const p = publisher(js, 2);
    let done = false;
    const r = p.publish([item('events.1.0', 'a\n'), item('events.1.1', 'b\n')]).then(() => (done = true));
    await tick();
    sent[0]!.settle(false);
    await new Promise((res) => setTimeout(res, 80)); // backoff before the second attempt
    expect(sent.filter((s) => s.subject === 'events.1.0').map((s) => s.msgID)).toEqual([sent[0]!.msgID, sent[0]!.msgID]);
    sent[1]!.settle(true);
    await tick();
    expect(done).toBe(false);
    sent[2]!.settle(true);
    await r;
    expect(done).toBe(true);
  });

  it('publisher - when a message fails for good, what is queued behind it on that subject fails too (503), never overtaking it', async () => {
    const { js, sent } = fakeJetStream();
    const p = publisher(js);
    const first = p.publish([item('events.1.0', 'first\n')]);
    await tick();
    const behind = p.publish([item('events.1.0', 'behind\n')]);
    const elsewhere = p.publish([item('events.1.5', 'elsewhere\n')]);
    await tick();
    sent[0]!.settle(false);
    await expect(first).rejects.toBeInstanceOf(CaptureError);
    const err = await behind.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CaptureError);
    expect((err as CaptureError).code).toBe('unavailable');
    expect((err as CaptureError).headers['Retry-After']).toBe('1');
    await tick();
    expect(sent.map((s) => s.text)).toEqual(['first\n', 'elsewhere\n']); // 'behind' was never published
    sent[1]!.settle(true);
    await elsewhere;
  });
});
