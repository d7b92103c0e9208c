import { describe, expect, it } from 'vitest';
import { packOutputs, parseMessages, processedLine, propertiesInsertAt, serializedLine, type OutputLine, type SourceMessage } from './batch-codec.js';

const enc = new TextEncoder();
function msg(seq: number, subject: string, lines: string[]): SourceMessage {
  return { seq, subject, data: enc.encode(lines.join('\n') + '\n'), storedAtMs: 0 };
}
const line = (uuid: string, extra = '') => `{"uuid":"${uuid}","event":"e","distinct_id":"d","properties":{},"timestamp":"2024-01-01T00:00:00Z","now":"2024-01-01T00:00:00Z","token":"t","project_id":1${extra}}`;
/** A line that is serialised again (a JSON string here, so its bytes are easy to predict). */
const text = (value: string, at = 0): OutputLine => serializedLine(value, at);
const U1 = '0190a7a0-0000-7000-8000-000000000001';
const U2 = '0190a7a0-0000-7000-8000-000000000002';

describe('batch codec', () => {
  it('parse - bad lines and foreign subjects become warnings, good lines keep their text', () => {
    const parsed = parseMessages('events', [
      msg(1, 'events.1.3', [line(U1), 'not json', '{"uuid":"x"}', '']),
      msg(2, 'historical.1.3', [line(U2)]),
    ]);
    expect(parsed.events.map((e) => e.event.uuid)).toEqual([U1]);
    const { span, message } = parsed.events[0]!;
    expect(parsed.bodies[message]!.toString('utf8', span!.start, span!.end)).toBe(line(U1));
    expect(parsed.events[0]!.key).toBe(`1:${U1}`);
    expect(parsed.projects).toEqual([1, undefined]);
    expect(parsed.warnings.map((w) => w.details.reason)).toEqual(['not JSON', 'uuid missing or invalid']);
    expect(parsed.malformed).toBe(3);
  });

  it('parse - a line that needed fixing is serialised again, never spliced', () => {
    const parsed = parseMessages('events', [msg(1, 'events.1.0', [line(U1, ',"person_id":"evil"'), line(U2).replace('"timestamp":"2024-01-01T00:00:00Z"', '"timestamp":"soon"')])]);
    expect(parsed.events.map((e) => e.span)).toEqual([undefined, undefined]);
    expect(parsed.events[1]!.event.timestamp).toBe('2024-01-01T00:00:00Z');
  });

  it('output - a spliced line is the captured bytes plus person_id, multi-byte text included', () => {
    const l = line(U1, ',"properties2":{"name":"Zoë 🚀"}');
    const parsed = parseMessages('events', [msg(1, 'events.1.0', ['  ' + l + '  \r', line(U2)])]);
    const [first, second] = parsed.events;
    const body = parsed.bodies[0];
    const spliced = processedLine({ person_id: 'p' }, body, first!, true);
    const personless = processedLine({}, body, second!, true);
    const reserialised = processedLine({ ...JSON.parse(l), person_id: 'p' } as never, body, first!, false);
    const out = packOutputs('EVENTS', 0, [msg(1, 'events.1.0', [])], [1], [[spliced, personless, reserialised]], 1024, 8 << 20)[0]!.body.toString();
    const [a, b, c, end] = out.split('\n');
    // Byte for byte: a replayed batch must publish identical messages.
    expect(a).toBe(`${l.slice(0, -1)},"person_id":"p"}`);
    expect(b).toBe(line(U2));
    expect(JSON.parse(c!)).toEqual(JSON.parse(a!));
    expect(end).toBe('');
  });

  it('output - properties a hook added are written into the spliced line, byte for byte, between other lines', () => {
    const U3 = '0190a7a0-0000-7000-8000-000000000003';
    const withProps = (uuid: string) => line(uuid).replace('"properties":{}', '"properties":{"a":1}');
    const parsed = parseMessages('events', [msg(1, 'events.1.0', [withProps(U1), line(U2), ' ' + withProps(U3)])]);
    const body = parsed.bodies[0]!;
    for (const i of [0, 2]) {
      const e = parsed.events[i]!;
      e.insert = { at: propertiesInsertAt(body, e.span!)!.at, bytes: Buffer.from('"$k":"vé",') };
    }
    const [first, second, third] = parsed.events.map((e, i) => processedLine(i === 1 ? {} : { person_id: `p${i}` }, body, e, true));
    const out = packOutputs('EVENTS', 0, [msg(1, 'events.1.0', [])], [1], [[first!, second!, third!]], 1024, 8 << 20)[0]!.body.toString();
    const added = (uuid: string, person: string) => `${withProps(uuid).replace('"properties":{', '"properties":{"$k":"vé",').slice(0, -1)},"person_id":"${person}"}`;
    expect(out).toBe(`${added(U1, 'p0')}\n${line(U2)}\n${added(U3, 'p2')}\n`);
  });

  it('parse - a byte order mark is skipped; lines whose bytes cannot be reused are serialised again', () => {
    const good = enc.encode(line(U1) + '\n');
    const badUtf8 = Buffer.concat([enc.encode(line(U2).slice(0, -1) + ',"x":"'), Buffer.from([0xc0, 0x80]), enc.encode('"}\n')]);
    const hostile = enc.encode(line('0190a7a0-0000-7000-8000-000000000003', ',"y":"a\\u0000b","z":"\\uD800"') + '\n');
    const data = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), good, badUtf8, hostile]);
    const parsed = parseMessages('events', [{ seq: 1, subject: 'events.1.0', data, storedAtMs: 0 }]);
    expect(parsed.malformed).toBe(0);
    expect(parsed.events.map((e) => e.span !== undefined)).toEqual([true, false, false]);
    const cleaned = parsed.events[2]!.event as unknown as Record<string, unknown>;
    expect([cleaned.y, cleaned.z]).toEqual(['a\ufffdb', '\ufffd']);
    const lines = parsed.events.map((e) => processedLine({ ...e.event, person_id: 'p' }, parsed.bodies[0], e, true));
    const body = packOutputs('EVENTS', 0, [msg(1, 'events.1.0', [])], [1], [lines], 1024, 8 << 20)[0]!.body;
    expect(Buffer.from(body.toString('utf8')).equals(body)).toBe(true); // valid UTF-8 throughout
    expect(body.toString().split('\n').slice(0, 3).map((x) => JSON.parse(x).x)).toEqual([undefined, '\ufffd\ufffd', undefined]);
  });

  it('output - parts follow source messages per project; ids depend only on the sequences covered', () => {
    const messages = [
      msg(10, 'events.1.3', [line(U1)]),
      msg(11, 'events.2.3', [line(U1)]),
      msg(12, 'events.1.3', [line(U2)]),
    ];
    const lines = [[text('a')], [text('b')], [text('c')]];
    const parts = packOutputs('EVENTS', 3, messages, [1, 2, 1], lines, 1024 * 1024, 8 * 1024 * 1024);
    expect(parts.map((p) => [p.subject, p.msgId, new TextDecoder().decode(p.body), p.events])).toEqual([
      ['processed.1.3', 'EVENTS:3:1:10-12', '"a"\n"c"\n', 2],
      ['processed.2.3', 'EVENTS:3:2:11-11', '"b"\n', 1],
    ]);
    // Small parts: one per source message, whatever the lines are.
    const small = packOutputs('EVENTS', 3, messages, [1, 2, 1], [[text('x')], [], [text('y'), text('z')]], 1, 8 * 1024 * 1024);
    expect(small.map((p) => p.msgId)).toEqual(['EVENTS:3:1:10-10', 'EVENTS:3:1:12-12']);
  });

  it('output - a part larger than the max payload is cut at source lines under numbered ids, each under it', () => {
    const { messages, parsed, lines } = bigMessage(100);
    const parts = packOutputs('HISTORICAL', 0, messages, [1], [lines], 1024 * 1024, MAX_PAYLOAD);
    expect(parts.length).toBeGreaterThan(3);
    expect(parts.map((p) => p.msgId)).toEqual(parts.map((_, k) => `HISTORICAL:0:1:5-5:${k}`));
    expect(parts.every((p) => p.body.length <= MAX_PAYLOAD)).toBe(true);
    const uuids = parts.flatMap((p) => p.body.toString().trim().split('\n').map((l) => (JSON.parse(l) as { uuid: string }).uuid));
    expect(uuids).toEqual(parsed.events.map((e) => e.event.uuid));
  });

  it('output - a replay that keeps fewer lines (duplicates by then) cuts the same chunks: every line keeps its message id', () => {
    const { messages, lines } = bigMessage(100);
    const idOfLine = (parts: ReturnType<typeof packOutputs>) =>
      new Map(parts.flatMap((p) => p.body.toString().trim().split('\n').map((l) => [(JSON.parse(l) as { uuid: string }).uuid, p.msgId] as const)));
    const first = idOfLine(packOutputs('EVENTS', 2, messages, [1], [lines], 1024 * 1024, MAX_PAYLOAD));
    const kept = lines.filter((_, i) => i % 9 !== 4);
    const replay = idOfLine(packOutputs('EVENTS', 2, messages, [1], [kept], 1024 * 1024, MAX_PAYLOAD));
    expect(replay.size).toBe(kept.length);
    for (const [uuid, id] of replay) expect([uuid, id]).toEqual([uuid, first.get(uuid)]);
  });

  it('output - lines grown far beyond their source lines are split further under sub-ids, each under the max payload', () => {
    const messages = [msg(5, 'events.1.0', [line(U1)])];
    const big = Array.from({ length: 100 }, () => text('x'.repeat(1000)));
    const parts = packOutputs('HISTORICAL', 0, messages, [1], [big], 1024 * 1024, MAX_PAYLOAD);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.map((p) => p.msgId)).toEqual(parts.map((_, k) => `HISTORICAL:0:1:5-5.${k}`));
    expect(parts.reduce((n, p) => n + p.events, 0)).toBe(100);
    expect(parts.every((p) => p.body.length <= MAX_PAYLOAD)).toBe(true);
    expect(parts.map((p) => p.body.toString()).join('')).toBe(`"${'x'.repeat(1000)}"\n`.repeat(100));
  });
});

/** The server's max payload in these tests: 84 KB, so chunks are planned up to 20 KB (the margin is 64 KiB). */
const MAX_PAYLOAD = 64 * 1024 + 20_000;

/** One source message of `count` lines of ~1 KB and their processed lines (each gains a person_id). */
function bigMessage(count: number) {
  const uuid = (i: number) => `0190a7a0-0000-7000-8000-${String(i).padStart(12, '0')}`;
  const messages = [msg(5, 'events.1.0', Array.from({ length: count }, (_, i) => line(uuid(i), `,"pad":"${'p'.repeat(900)}"`)))];
  const parsed = parseMessages('events', messages);
  const lines = parsed.events.map((e) => processedLine({ person_id: 'person' }, parsed.bodies[0], e, true));
  return { messages, parsed, lines };
}

describe('adding properties to a line', () => {
  const at = (line: string) => propertiesInsertAt(Buffer.from(line), { start: 0, end: Buffer.byteLength(line) });
  it('batch codec - properties are added after the top-level properties object opens, never inside another object or a string', () => {
    const plain = '{"uuid":"u","event":"e","distinct_id":"d","properties":{"a":1},"timestamp":"t"}';
    expect(at(plain)).toEqual({ at: plain.indexOf('"properties":{') + 14, empty: false });
    expect(at('{"uuid":"u","properties":{ },"x":1}')).toMatchObject({ empty: true });
    // A nested object before it: its "properties" could be a nested key; serialised instead.
    expect(at('{"$set":{"properties":{}},"properties":{"a":1}}')).toBeUndefined();
    // Text that looks like the key inside a string is escaped (never `,"properties":{`); a brace in
    // a string before the key is taken for an object: serialised again, never spliced wrongly.
    expect(at('{"event":"a\\"properties\\":{","properties":{"a":1}}')).toBeUndefined();
    expect(at('{"event":"x\\",\\"properties\\":1","properties":{"a":1}}')).toMatchObject({ empty: false });
    expect(at('{"event":"e"}')).toBeUndefined();
  });

  it('batch codec - a line that may have "properties" again is serialised again (JSON.parse keeps the last); the next line does not count', () => {
    expect(at('{"properties":{"a":1},"t":"x","properties":{"b":2}}')).toBeUndefined();
    expect(at('{"properties":{"a":1},"properties" :{"b":2}}')).toBeUndefined();
    expect(at('{"properties":{"a":1},"propert\\u0069es":{"b":2}}')).toBeUndefined();
    // Cautious: a nested key of that name, or any \u escape, also sends the line to serialisation.
    expect(at('{"properties":{"a":{"properties":1}}}')).toBeUndefined();
    expect(at('{"properties":{"a":"\\u0001"}}')).toBeUndefined();
    // Only the line's own bytes are looked at, not those of the lines after it in the message.
    const first = '{"uuid":"u","properties":{"a":1},"t":"x"}';
    const message = Buffer.from(`${first}\n{"uuid":"v","properties":{"b":2}}\n`);
    expect(propertiesInsertAt(message, { start: 0, end: Buffer.byteLength(first) })).toEqual({ at: first.indexOf('{"a"') + 1, empty: false });
  });
});
