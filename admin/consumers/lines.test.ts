import { describe, expect, it } from 'vitest';
import { derivedId, parseLines } from './lines.js';

describe('stream lines', () => {
  it('lines - one bad line never spoils its neighbours', () => {
    const data = new TextEncoder().encode('{"a":1}\nnot json\n\n[1,2]\n{"b":"x"}\n"s"');
    expect(parseLines(data)).toEqual([{ a: 1 }, undefined, undefined, { b: 'x' }, undefined]);
  });

  it('lines - derived ids are stable UUIDs, distinct per stream, sequence and line', () => {
    const id = derivedId('PLUGIN_LOGS', 42, 3);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(derivedId('PLUGIN_LOGS', 42, 3)).toBe(id);
    const others = new Set([derivedId('PLUGIN_LOGS', 42, 4), derivedId('PLUGIN_LOGS', 43, 3), derivedId('BATCH_EXPORT_LOGS', 42, 3), id]);
    expect(others.size).toBe(4);
  });
});
