// The hooks' changes as the batch takes them (batch-transaction.ts applyHooks): properties written
// into the captured bytes, a replaced event serialised once, and a change whose line would not fit
// a PROCESSED message refused with the event left as it was.
import { describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { EventHooks, HookedEventTooLargeError, type HookBatch } from '../coordination/index.js';
import { lineRoom, parseMessages, processedLine, type SourceMessage } from './batch-codec.js';
import { applyHooks } from './batch-transaction.js';

const U1 = '0190a7a0-0000-7000-8000-000000000001';
const MAX_PAYLOAD = 128 * 1024;
const line = `{"uuid":"${U1}","event":"e","distinct_id":"d","properties":{"a":1},"timestamp":"2024-01-01T00:00:00Z","token":"t","project_id":1}`;
const source: SourceMessage = { seq: 1, subject: 'events.1.0', data: new TextEncoder().encode(`${line}\n`), storedAtMs: 0 };

/** Runs one hook on the line's event; the error it met, if any, and the event as the batch holds it. */
async function hooked(hook: (batch: HookBatch) => void) {
  const parsed = parseMessages('events', [source]);
  const hooks = new EventHooks();
  let error: unknown;
  hooks.add('test', (batch) => {
    try {
      hook(batch);
    } catch (err) {
      error = err;
    }
  });
  const [entry] = await applyHooks(hooks, { stream: 'EVENTS', shard: 0 }, parsed.events, parsed.bodies, MAX_PAYLOAD);
  const out = processedLine({ person_id: 'p' }, parsed.bodies[0], entry!, true);
  const bytes = Buffer.concat([out.source!.subarray(out.start, out.insertAt ?? out.end), out.insert ?? Buffer.alloc(0), out.source!.subarray(out.insertAt ?? out.end, out.end), out.tail]);
  return { error, entry: entry!, processed: JSON.parse(bytes.toString()) as CapturedEvent };
}

describe('hooks applied to a batch', () => {
  it('apply hooks - added properties are written into the captured bytes, not serialised again; too many bytes are refused, the event as it was', async () => {
    const small = await hooked((b) => b.addProperties(0, { $plugins_succeeded: ['P (1)'] }));
    expect(small.error).toBeUndefined();
    expect(small.entry.body).toBeUndefined();
    expect(small.entry.insert?.bytes.toString()).toBe('"$plugins_succeeded":["P (1)"],');
    expect(small.processed.properties).toEqual({ $plugins_succeeded: ['P (1)'], a: 1 });

    // Characters are not bytes: a third of the room in '€' is the whole room in UTF-8.
    const room = lineRoom(MAX_PAYLOAD);
    const big = await hooked((b) => b.addProperties(0, { blob: '€'.repeat(Math.ceil(room / 3)) }));
    expect(big.error).toBeInstanceOf(HookedEventTooLargeError);
    expect(big.error).toMatchObject({ uuid: U1, room });
    expect((big.error as HookedEventTooLargeError).bytes).toBeGreaterThan(room);
    expect(big.entry.event.properties).toEqual({ a: 1 });
    expect(big.entry.insert).toBeUndefined();
    expect(big.processed).toEqual({ ...JSON.parse(line), person_id: 'p' });
  });

  it('apply hooks - a replaced event is serialised once and copied out with person_id; too many bytes are refused, the event as it was', async () => {
    const renamed = await hooked((b) => b.replace(0, { ...b.events[0]!.event, event: 'renamed', properties: { a: 2 } }));
    expect(renamed.error).toBeUndefined();
    expect(renamed.entry.body?.toString()).toBe(JSON.stringify(renamed.entry.event));
    expect(renamed.processed).toEqual({ ...JSON.parse(line), event: 'renamed', properties: { a: 2 }, person_id: 'p' });

    // JSON escapes a control character in 6 bytes.
    const escaped = await hooked((b) => b.replace(0, { ...b.events[0]!.event, event: 'renamed', properties: { c: '\u0001'.repeat(Math.ceil(lineRoom(MAX_PAYLOAD) / 6)) } }));
    expect(escaped.error).toBeInstanceOf(HookedEventTooLargeError);
    expect(escaped.entry.event.event).toBe('e');
    expect(escaped.entry.body).toBeUndefined();
    expect(escaped.processed).toEqual({ ...JSON.parse(line), person_id: 'p' });
  });
});
