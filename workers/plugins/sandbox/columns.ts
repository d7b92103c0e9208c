// The host's answer when a plugin first reads a field in a batch (prelude.ts `column`): that field
// of every event of the batch at once, "<mask>\n<JSON array>", mask "" when every event has it,
// else "1"/"0" per event (JSON has no undefined).
import type { SandboxBatch, SandboxEvent } from './sandbox.js';

/** Fields of a host event a plugin never sees (the project is `team_id`; the token stays private). */
const HIDDEN = new Set(['token', 'project_id']);

export function topField(batch: SandboxBatch, event: SandboxEvent, field: string): unknown {
  if (field === 'team_id') return batch.teamId;
  if (HIDDEN.has(field) || !Object.hasOwn(event, field)) return undefined;
  return (event as unknown as Record<string, unknown>)[field];
}

export function topKeys(event: SandboxEvent): string[] {
  const keys = Object.keys(event).filter((k) => !HIDDEN.has(k));
  keys.push('team_id');
  return keys;
}

function columnOf(values: unknown[]): string {
  let mask = '';
  for (let i = 0; i < values.length; i++) {
    if (values[i] === undefined) {
      if (mask === '') mask = '1'.repeat(i);
      mask += '0';
    } else if (mask !== '') mask += '1';
  }
  return `${mask}\n${JSON.stringify(values)}`;
}

/** An event whole as a plugin sees it: its fields but the hidden ones, and `team_id`. */
export function eventView(batch: SandboxBatch, event: SandboxEvent): Record<string, unknown> {
  const view: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(event)) if (!HIDDEN.has(k)) view[k] = v;
  view.team_id = batch.teamId;
  return view;
}

/** Each event's JSON text as a plugin sees it, made once per batch (a result may name its own: results.ts "V"). */
const texts = new WeakMap<SandboxBatch, string[]>();
export function eventTexts(batch: SandboxBatch): readonly string[] {
  let made = texts.get(batch);
  if (!made) texts.set(batch, (made = batch.events.map((e) => JSON.stringify(eventView(batch, e)))));
  return made;
}

/**
 * `key`: "t<field>" a top-level field, "p<name>" a property, "k" the top-level keys; "s" the
 * events whole, one JSON text a line (JSON.stringify never writes a line break).
 */
export function columnText(batch: SandboxBatch, key: string): string {
  const { events } = batch;
  if (key === 's') return eventTexts(batch).join('\n');
  const values: unknown[] = new Array(events.length);
  if (key === 'k') {
    for (let i = 0; i < events.length; i++) values[i] = topKeys(events[i]!);
  } else if (key[0] === 't') {
    const field = key.slice(1);
    for (let i = 0; i < events.length; i++) values[i] = topField(batch, events[i]!, field);
  } else if (key[0] === 'p') {
    const name = key.slice(1);
    for (let i = 0; i < events.length; i++) {
      const properties = events[i]!.properties;
      values[i] = Object.hasOwn(properties, name) ? properties[name] : undefined;
    }
  } else {
    throw new RangeError(`no column ${JSON.stringify(key)}`);
  }
  return columnOf(values);
}
