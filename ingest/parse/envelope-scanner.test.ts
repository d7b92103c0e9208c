// The scanner may only make parsing cheaper, never different: for any payload, reading it
// event by event must give exactly what JSON.parse gives, or the same refusal.
import { describe, expect, it } from 'vitest';
import { scanPayload } from './envelope-scanner.js';
import { CaptureError } from '../errors.js';
import { readEnvelope } from './read-envelope.js';

function viaEnvelope(text: string): unknown {
  try {
    const e = readEnvelope(Buffer.from(text), 0); // scan every payload, whatever its size
    return { events: Array.from({ length: e.count }, (_, i) => e.event(i)), token: e.batchToken, historical: e.historical, sentAt: e.sentAt };
  } catch (err) {
    if (err instanceof CaptureError) return `error:${err.code}`;
    throw err;
  }
}

function viaJsonParse(text: string): unknown {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(text).toString()); // what arrives is bytes (a lone surrogate becomes U+FFFD)
  } catch {
    return 'error:invalid_json';
  }
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const check = (events: unknown[]) => {
    for (const e of events) if (!isObj(e) || (e.properties !== undefined && e.properties !== null && !isObj(e.properties))) return 'error:invalid_event';
    return undefined;
  };
  if (Array.isArray(json)) return check(json) ?? { events: json, token: undefined, historical: false, sentAt: undefined };
  if (!isObj(json)) return 'error:invalid_payload';
  if ('batch' in json) {
    if (!Array.isArray(json.batch)) return 'error:invalid_payload';
    return check(json.batch) ?? { events: json.batch, token: json.api_key ?? json.token, historical: json.historical_migration === true, sentAt: json.sent_at };
  }
  return check([json]) ?? { events: [json], token: undefined, historical: false, sentAt: json.sent_at };
}

/** A small deterministic PRNG so failures reproduce. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const TRICKY = ['a', '"q"', 'back\\slash', '\\"', 'ü', '🦔', '{[', ']}', ',', ':', '\\\\"', ' ', '\n', 'batch', '"batch":[1]'];

function randomEvent(r: () => number): unknown {
  const pick = () => TRICKY[Math.floor(r() * TRICKY.length)]!;
  return { event: pick(), distinct_id: pick() + pick(), properties: { [pick()]: pick(), nested: { list: [pick(), 1.5e3, null, true, { deep: pick() }] } } };
}

function randomPayload(r: () => number): string {
  const events = Array.from({ length: Math.floor(r() * 5) }, () => randomEvent(r));
  const space = () => [' ', '\n', '\t', '', '\r\n'][Math.floor(r() * 5)]!;
  const shape = r();
  if (shape < 0.3) return space() + JSON.stringify(events, null, r() < 0.5 ? 2 : undefined) + space();
  const body: Record<string, unknown> = { api_key: 'phc_x', batch: events };
  if (r() < 0.5) body.historical_migration = r() < 0.5;
  if (r() < 0.5) body.sent_at = '2026-11-22T10:00:00Z';
  if (r() < 0.2) body.extra = { batch: 'not this one', list: [1, [2, [3]]] };
  const entries = Object.entries(body).sort(() => r() - 0.5);
  return `${space()}{${entries.map(([k, v]) => `${space()}${JSON.stringify(k)}${space()}:${space()}${JSON.stringify(v)}`).join(',')}${space()}}${space()}`;
}

function mutate(text: string, r: () => number): string {
  const chars = ['{', '}', '[', ']', '"', '\\', ',', ':', ' ', 'x', '1', ''];
  const at = Math.floor(r() * (text.length + 1));
  const op = r();
  const c = chars[Math.floor(r() * chars.length)]!;
  if (op < 0.4) return text.slice(0, at) + c + text.slice(at);
  if (op < 0.8) return text.slice(0, at) + text.slice(at + 1);
  return text.slice(0, at) + c + text.slice(at + 1);
}

describe('envelope scanner', () => {
  it('scanner - finds the batch and the other fields in any key order', () => {
    const scanned = scanPayload(Buffer.from('{ "sent_at": "x", "batch" : [ {"a":1} , {"b":"]}"} ], "api_key":"k" }'));
    expect(scanned).toBeDefined();
    expect(scanned!.shape).toBe('batch');
    expect(scanned!.fields).toEqual({ sent_at: 'x', api_key: 'k' });
    expect(scanned!.events.length).toBe(4);
  });

  it('scanner - leaves single events, repeated keys and broken envelopes to JSON.parse', () => {
    for (const text of ['{"event":"e"}', '{"batch":[],"batch":[{}]}', '{"batch":[{}]', '[{},]', '[{} {}]', '{"batch":[]} x', '"s"']) {
      expect(scanPayload(Buffer.from(text)), text).toBeUndefined();
    }
  });

  it('scanner - 3,000 random payloads read exactly as JSON.parse reads them', () => {
    const r = rng(42);
    for (let n = 0; n < 3000; n++) {
      const text = randomPayload(r);
      expect(viaEnvelope(text), text).toEqual(viaJsonParse(text));
    }
  });

  it('scanner - 20,000 randomly corrupted payloads are refused or read exactly as JSON.parse does', () => {
    const r = rng(7);
    for (let n = 0; n < 20_000; n++) {
      let text = randomPayload(r);
      const edits = 1 + Math.floor(r() * 3);
      for (let k = 0; k < edits; k++) text = mutate(text, r);
      expect(viaEnvelope(text), text).toEqual(viaJsonParse(text));
    }
  });
});
