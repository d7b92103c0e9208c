// The hooks' changes as the batch takes them (batch-transaction.ts applyHooks): properties written
// into the captured bytes, a replaced event serialised once, and a change whose line would not fit
// a PROCESSED message refused with the event left as it was.
import { describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { messageSizeLimit } from '../../ingest/message-size.js';
import { EventHooks, HookedEventTooLargeError, type HookBatch } from '../coordination/index.js';
import { bodyRoom, lineRoom, packOutputs, parseMessages, processedLine, type SourceMessage } from './batch-codec.js';
import { applyHooks } from './batch-transaction.js';

const U1 = '0190a7a0-0000-7000-8000-000000000001';
const PERSON = '0190a7a0-0000-7000-8000-0000000000ff';
const MAX_PAYLOAD = 128 * 1024;
const STREAM = 'EVENTS';
const lineOf = (properties: string) =>
  `{"uuid":"${U1}","event":"e","distinct_id":"d","properties":${properties},"timestamp":"2024-01-01T00:00:00Z","token":"t","project_id":1}`;
const line = lineOf('{"a":1}');

/**
 * Runs one hook on the event of `captured` (a line); the error it met, if any, the event as the
 * batch holds it, its processed line (person_id appended) and the PROCESSED messages packed from it.
 */
async function hooked(hook: (batch: HookBatch) => void, captured = line, maxPayload = MAX_PAYLOAD) {
  // The largest sequence a stream can reach: the longest message id.
  const source: SourceMessage = { seq: Number.MAX_SAFE_INTEGER, subject: 'events.1.0', data: new TextEncoder().encode(`${captured}\n`), storedAtMs: 0 };
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
  const [entry] = await applyHooks(hooks, { stream: STREAM, shard: 0 }, parsed.events, parsed.bodies, maxPayload);
  const out = processedLine({ person_id: PERSON }, parsed.bodies[0], entry!, true);
  const bytes = Buffer.concat([out.source!.subarray(out.start, out.insertAt ?? out.end), out.insert ?? Buffer.alloc(0), out.source!.subarray(out.insertAt ?? out.end, out.end), out.tail]);
  const parts = packOutputs(STREAM, 0, [source], parsed.projects, [[out]], 1 << 30, maxPayload);
  return { error, entry: entry!, processed: JSON.parse(bytes.toString()) as CapturedEvent, parts };
}

describe('hooks applied to a batch', () => {
  it('apply hooks - strings capture never lets through (NUL, lone surrogates) are cleaned in changed and added properties, as in a captured line', async () => {
    const replaced = await hooked((b) => b.replace(0, { ...b.events[0]!.event, properties: { $set: { name: 'a\u0000b', cut: 'x\ud83d' } } }));
    expect(replaced.error).toBeUndefined();
    expect(replaced.entry.event.properties).toEqual({ $set: { name: 'a\ufffdb', cut: 'x\ufffd' } });
    expect(replaced.processed.properties).toEqual({ $set: { name: 'a\ufffdb', cut: 'x\ufffd' } });
    const added = await hooked((b) => b.addProperties(0, { $set: { name: 'a\u0000b' } }));
    expect(added.error).toBeUndefined();
    expect(added.entry.event.properties).toEqual({ a: 1, $set: { name: 'a\ufffdb' } });
    expect(added.processed.properties).toEqual({ a: 1, $set: { name: 'a\ufffdb' } });
  });

  it('apply hooks - added properties are written into the captured bytes, not serialised again; too many bytes are refused, the event as it was', async () => {
    const small = await hooked((b) => b.addProperties(0, { $plugins_succeeded: ['P (1)'] }));
    expect(small.error).toBeUndefined();
    expect(small.entry.body).toBeUndefined();
    expect(small.entry.insert?.bytes.toString()).toBe('"$plugins_succeeded":["P (1)"],');
    expect(small.processed.properties).toEqual({ $plugins_succeeded: ['P (1)'], a: 1 });

    // Characters are not bytes: a third of the room in '€' is the whole room in UTF-8.
    const room = lineRoom(MAX_PAYLOAD, STREAM, 0);
    const big = await hooked((b) => b.addProperties(0, { blob: '€'.repeat(Math.ceil(room / 3)) }));
    expect(big.error).toBeInstanceOf(HookedEventTooLargeError);
    expect(big.error).toMatchObject({ uuid: U1, room });
    expect((big.error as HookedEventTooLargeError).bytes).toBeGreaterThan(room);
    expect(big.entry.event.properties).toEqual({ a: 1 });
    expect(big.entry.insert).toBeUndefined();
    expect(big.processed).toEqual({ ...JSON.parse(line), person_id: PERSON });
  });

  it('apply hooks - a line with "properties" twice at its top level gets what hooks add in the object JSON.parse keeps, the last', async () => {
    // Never written by capture; a line published to EVENTS by another client can be anything.
    const twice = `{"uuid":"${U1}","event":"e","distinct_id":"d","properties":{"first":1},"timestamp":"2024-01-01T00:00:00Z","properties":{"a":1},"token":"t","project_id":1}`;
    const added = await hooked((b) => b.addProperties(0, { $plugins_succeeded: ['P (1)'] }), twice);
    expect(added.error).toBeUndefined();
    expect(added.entry.event.properties).toEqual({ a: 1, $plugins_succeeded: ['P (1)'] });
    expect(added.processed.properties).toEqual({ a: 1, $plugins_succeeded: ['P (1)'] });
  });

  it('apply hooks - an added "__proto__" stays a property, in the bytes and in what processing reads, never the prototype', async () => {
    // Added properties parsed from JSON, where JSON.parse makes "__proto__" an own key.
    const added = await hooked((b) => b.addProperties(0, JSON.parse('{"__proto__":{"$set":{"admin":true}}}') as Record<string, unknown>));
    expect(added.error).toBeUndefined();
    const properties = added.entry.event.properties;
    expect(Object.getPrototypeOf(properties)).toBe(Object.prototype);
    // Processing reads $set from here: a person update the event does not carry would be applied.
    expect(properties.$set).toBeUndefined();
    expect(Object.keys(properties)).toEqual(['a', '__proto__']);
    expect(JSON.stringify(properties)).toBe('{"a":1,"__proto__":{"$set":{"admin":true}}}');
    expect(added.processed.properties).toEqual(JSON.parse('{"__proto__":{"$set":{"admin":true}},"a":1}'));
  });

  it('apply hooks - a replaced event is serialised once and copied out with person_id; too many bytes are refused, the event as it was', async () => {
    const renamed = await hooked((b) => b.replace(0, { ...b.events[0]!.event, event: 'renamed', properties: { a: 2 } }));
    expect(renamed.error).toBeUndefined();
    expect(renamed.entry.body?.toString()).toBe(JSON.stringify(renamed.entry.event));
    expect(renamed.processed).toEqual({ ...JSON.parse(line), event: 'renamed', properties: { a: 2 }, person_id: PERSON });

    // JSON escapes a control character in 6 bytes.
    const escaped = await hooked((b) => b.replace(0, { ...b.events[0]!.event, event: 'renamed', properties: { c: '\u0001'.repeat(Math.ceil(lineRoom(MAX_PAYLOAD, STREAM, 0) / 6)) } }));
    expect(escaped.error).toBeInstanceOf(HookedEventTooLargeError);
    expect(escaped.entry.event.event).toBe('e');
    expect(escaped.entry.body).toBeUndefined();
    expect(escaped.processed).toEqual({ ...JSON.parse(line), person_id: PERSON });
  });

  it('apply hooks - a captured event as large as ingest takes still gains what hooks add, and its PROCESSED message is published', async () => {
    // Ingest takes a line up to max_payload less 1 KiB and what processing may add (ingest/message-size.ts):
    // with 1 MiB, a 1,000,000-byte line is an ordinary event, and the lists a plugin adds must fit beside it.
    const MIB = 1024 * 1024;
    const big = lineOf(`{"a":1,"pad":"${'x'.repeat(1_000_000 - line.length - 9)}"}`);
    expect(Buffer.byteLength(big)).toBe(1_000_000);
    const lists = await hooked((b) => b.addProperties(0, { x: 1, $plugins_succeeded: ['P (1)', 'Q (2)'] }), big, MIB);
    expect(lists.error).toBeUndefined();
    expect(lists.processed.properties).toMatchObject({ x: 1, $plugins_succeeded: ['P (1)', 'Q (2)'], a: 1 });
    expect(lists.parts).toHaveLength(1);
    expect(lists.parts[0]!.body.length).toBeLessThanOrEqual(bodyRoom(MIB, lists.parts[0]!.msgId));
    // The largest line ingest takes, replaced: still room for what a plugin adds.
    const largest = lineOf(`{"a":1,"pad":"${'x'.repeat(messageSizeLimit(MIB, MIB) - 1 - line.length - 9)}"}`);
    const replaced = await hooked((b) => b.replace(0, { ...b.events[0]!.event, properties: { ...b.events[0]!.event.properties, $plugins_succeeded: ['P (1)'] } }), largest, MIB);
    expect(replaced.error).toBeUndefined();
    expect(replaced.parts[0]!.body.length).toBeLessThanOrEqual(bodyRoom(MIB, replaced.parts[0]!.msgId));
  });

  it('apply hooks - the room is what one PROCESSED message can carry: a line of exactly it is published, a byte more refused, $groups counted', async () => {
    const room = lineRoom(MAX_PAYLOAD, STREAM, 0);
    const padded = (bytes: number, extra: Record<string, unknown> = {}) => (b: HookBatch) => {
      const base = { ...b.events[0]!.event, properties: { ...extra, pad: '' } };
      b.replace(0, { ...base, properties: { ...extra, pad: 'x'.repeat(bytes - Buffer.byteLength(JSON.stringify(base))) } });
    };
    const exact = await hooked(padded(room));
    expect(exact.error).toBeUndefined();
    expect(exact.entry.body?.length).toBe(room);
    expect(exact.parts).toHaveLength(1);
    // Under the longest id the stream's messages can get, with person_id and the newline.
    expect(exact.parts[0]!.body.length).toBeLessThanOrEqual(bodyRoom(MAX_PAYLOAD, exact.parts[0]!.msgId));
    const over = await hooked(padded(room + 1));
    expect(over.error).toMatchObject({ bytes: room + 1, room });
    // Processing adds `"$group_N":"<key>"` for each of $groups' keys (five at most).
    const grouped = await hooked(padded(room, { $groups: { company: 'k'.repeat(400) } }));
    expect(grouped.error).toMatchObject({ bytes: room, room: room - ',"$group_0":'.length - 402 });
  });
});
