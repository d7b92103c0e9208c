import { describe, expect, it } from 'vitest';
import { detectFormat, InputFormatError, JsonArraySplitter, NdjsonSplitter, type RawRecord, type RecordSplitter } from './records.js';

/** Feeds `text` in chunks of `size` bytes (0 = one chunk) and collects the records as strings. */
function split(splitter: RecordSplitter, text: string, size = 0): { position: number; line: number; text: string }[] {
  const bytes = Buffer.from(text);
  const out: RawRecord[] = [];
  const step = size || bytes.length || 1;
  for (let i = 0; i < bytes.length; i += step) out.push(...splitter.push(Buffer.from(bytes.subarray(i, i + step))));
  out.push(...splitter.end());
  return out.map((r) => ({ position: r.position, line: r.line, text: r.bytes.toString() }));
}

describe('import records', () => {
  it('import records - NDJSON lines keep their line numbers; blank lines, CRLF and a missing final newline are handled', () => {
    const text = '{"a":1}\r\n\n  {"b":"x y"}  \n\r\n{"c":[1,2]}';
    const expected = [
      { position: 1, line: 1, text: '{"a":1}' },
      { position: 3, line: 3, text: '{"b":"x y"}' },
      { position: 5, line: 5, text: '{"c":[1,2]}' },
    ];
    for (const size of [0, 1, 2, 3, 5, 7, 64]) expect(split(new NdjsonSplitter(), text, size), `chunk ${size}`).toEqual(expected);
  });

  it('import records - NDJSON lines longer than a chunk are joined whole, multi-byte characters intact', () => {
    const long = JSON.stringify({ s: 'é✓😀'.repeat(1000) });
    const text = `${long}\n${long}\n`;
    for (const size of [1, 13, 4096]) {
      const records = split(new NdjsonSplitter(), text, size);
      expect(records.map((r) => r.text)).toEqual([long, long]);
    }
  });

  it('import records - JSON array elements are cut at top-level commas only, whatever the chunking', () => {
    const elements = [
      '{"event":"a","properties":{"s":"has , and ] and } and \\" and \\\\"}}',
      '{\n  "event": "b",\n  "nested": [{"x": [1, {"y": "]"}]}]\n}',
      '"a string, with a comma"',
      '42',
      '[1,[2,3]]',
      'null',
    ];
    const text = `  [\n${elements.join(' ,\n')}\n]\n`;
    const expected = [
      { position: 1, line: 2, text: elements[0] },
      { position: 2, line: 3, text: elements[1] },
      { position: 3, line: 7, text: elements[2] },
      { position: 4, line: 8, text: elements[3] },
      { position: 5, line: 9, text: elements[4] },
      { position: 6, line: 10, text: elements[5] },
    ];
    for (const size of [0, 1, 2, 3, 7, 11, 50]) expect(split(new JsonArraySplitter(), text, size), `chunk ${size}`).toEqual(expected);
  });

  it('import records - an empty JSON array has no records', () => {
    expect(split(new JsonArraySplitter(), '[ ]\n')).toEqual([]);
    expect(split(new JsonArraySplitter(), '[]')).toEqual([]);
  });

  it('import records - a truncated or malformed JSON array is an error naming the line', () => {
    expect(() => split(new JsonArraySplitter(), '[{"a":1},\n{"b":2')).toThrow(InputFormatError);
    expect(() => split(new JsonArraySplitter(), '[{"a":1}\n\n{"b":2}]')).toThrow(/expected , or ] after array element 1/);
    expect(() => split(new JsonArraySplitter(), '[{"a":1},,{"b":2}]')).toThrow(/array element 2 is missing/);
    expect(() => split(new JsonArraySplitter(), '[{"a":1}] x')).toThrow(/after the end/);
    try {
      split(new JsonArraySplitter(), '[\n{"a":1},\n{"b":2}\n\nnope]');
      expect.unreachable();
    } catch (err) {
      expect((err as InputFormatError).line).toBe(5);
    }
  });

  it('import records - the format is told by the first character that is not whitespace', () => {
    expect(detectFormat(Buffer.from('  \n[{"a":1}]'))).toBe('array');
    expect(detectFormat(Buffer.from('\ufeff{"a":1}\n'))).toBe('ndjson');
    expect(detectFormat(Buffer.from('\ufeff[]'))).toBe('array');
    expect(detectFormat(Buffer.from(' \n\t'))).toBeUndefined();
    expect(detectFormat(Buffer.alloc(0))).toBeUndefined();
  });
});
