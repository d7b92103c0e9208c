import { describe, expect, it } from 'vitest';
import { groupKeyOf, type CapturedEvent } from '../../lib/index.js';
import {
  applyPersonUpdate,
  distinctIdProperty,
  isIllegalDistinctId,
  normalizeEvent,
  personUpdateOf,
  requiredPropertyOf,
  unsetKeys,
} from './event-rules.js';

function event(extra: Partial<CapturedEvent> & { properties?: Record<string, unknown> }): CapturedEvent {
  return {
    uuid: '0190a7a0-0000-7000-8000-000000000001',
    event: 'e',
    distinct_id: 'd',
    properties: {},
    timestamp: '2024-01-01T00:00:00.000Z',
    now: '2024-01-01T00:00:00.000Z',
    token: 't',
    project_id: 1,
    ...extra,
  };
}

describe('event rules', () => {
  it('illegal ids - the reference lists, any casing or exact casing, quoted, blank', () => {
    for (const id of ['anonymous', 'ANONYMOUS', 'Guest', 'distinctid', 'distinct_id', 'ID', 'not_authenticated', 'Email', 'undefined', 'TRUE', 'false']) {
      expect(isIllegalDistinctId(id), id).toBe(true);
    }
    for (const id of ['[object Object]', 'NaN', 'None', 'none', 'null', '0']) expect(isIllegalDistinctId(id), id).toBe(true);
    for (const id of ['"guest"', "'null'", '"[object Object]"', '  ', '', "''", ' anonymous ']) expect(isIllegalDistinctId(id), id).toBe(true);
    for (const id of ['NULL', 'nan', 'NONE', '00', 'user-1', 'guest-2', '"user"', '0.0']) expect(isIllegalDistinctId(id), id).toBe(false);
  });

  it('person updates - $set_once only sets missing keys, then $set, then $unset', () => {
    const current = { a: 1, b: null, keep: true };
    const next = applyPersonUpdate(current, { setOnce: { a: 9, b: 9, c: 3 }, set: { d: 4, a: 2 }, unset: ['keep', 'absent'] });
    expect(next).toEqual({ a: 2, b: null, c: 3, d: 4 });
    expect(current).toEqual({ a: 1, b: null, keep: true });
  });

  it('person updates - no change gives undefined (no write needed)', () => {
    expect(applyPersonUpdate({ a: 1, o: { x: [1] } }, { set: { a: 1, o: { x: [1] } }, setOnce: { a: 2 }, unset: ['zz'] })).toBeUndefined();
    expect(applyPersonUpdate({}, personUpdateOf({}))).toBeUndefined();
  });

  it('person updates - keys named like Object.prototype members are keys like any other', () => {
    // As JSON.parse makes them: own properties, "__proto__" included.
    const update = personUpdateOf(JSON.parse('{"$set_once":{"constructor":"c","toString":"t"},"$set":{"__proto__":{"x":1},"valueOf":"v"}}'));
    const next = applyPersonUpdate({ a: 1 }, update)!;
    expect(JSON.parse(JSON.stringify(next))).toEqual(JSON.parse('{"a":1,"constructor":"c","toString":"t","__proto__":{"x":1},"valueOf":"v"}'));
    expect(Object.getPrototypeOf(next)).toBe(Object.prototype);
    const unset = applyPersonUpdate(next, { unset: ['__proto__', 'constructor'] })!;
    expect(Object.keys(unset)).toEqual(['a', 'toString', 'valueOf']);
    expect(applyPersonUpdate(next, { setOnce: JSON.parse('{"__proto__":2,"constructor":"other"}'), unset: [] })).toBeUndefined();
  });

  it('person updates - $unset takes an array or the keys of an object; anything else is ignored', () => {
    expect(unsetKeys(['a', 1, 'b'])).toEqual(['a', 'b']);
    expect(unsetKeys({ a: true, b: null })).toEqual(['a', 'b']);
    expect(unsetKeys('a')).toEqual([]);
    expect(personUpdateOf({ $set: 'nope', $set_once: [1] })).toEqual({ set: undefined, setOnce: undefined, unset: [] });
  });

  it('normalize - top-level $set and $set_once win over properties and leave the top level', () => {
    const e = event({ properties: { $set: { a: 'in', b: 'in' } }, $set: { a: 'top' }, $set_once: { c: 1 } });
    const n = normalizeEvent(e);
    expect(n.mode).toBe('full');
    expect(n.changed).toBe(true);
    expect(e.properties).toEqual({ $set: { a: 'top', b: 'in' }, $set_once: { c: 1 } });
    expect('$set' in e).toBe(false);
    expect('$set_once' in e).toBe(false);
  });

  it('normalize - personless events lose every person update; a non-boolean flag counts as true', () => {
    const e = event({ properties: { $process_person_profile: false, $set: { a: 1 }, $unset: ['b'], x: 1 }, $set_once: { c: 1 } });
    expect(normalizeEvent(e)).toMatchObject({ mode: 'personless', invalidPersonMode: false, changed: true });
    expect(e.properties).toEqual({ $process_person_profile: false, x: 1 });
    expect(normalizeEvent(event({ properties: { $process_person_profile: 'no' } }))).toMatchObject({ mode: 'full', invalidPersonMode: true });
    expect(normalizeEvent(event({ properties: { x: 1 } })).changed).toBe(false);
  });

  it('required properties - $pageview, $screen and the three survey events', () => {
    expect(requiredPropertyOf('$pageview')).toBe('$current_url');
    expect(requiredPropertyOf('$screen')).toBe('$screen_name');
    for (const name of ['survey sent', 'survey shown', 'survey dismissed']) expect(requiredPropertyOf(name)).toBe('$survey_id');
    expect(requiredPropertyOf('survey started')).toBeUndefined();
    expect(requiredPropertyOf('clicked')).toBeUndefined();
  });

  it('distinct id and group key properties - scalars stringified, objects become an illegal id', () => {
    expect(distinctIdProperty('a')).toBe('a');
    expect(distinctIdProperty(12)).toBe('12');
    expect(distinctIdProperty(null)).toBeUndefined();
    expect(distinctIdProperty({})).toBe('[object Object]');
    expect(groupKeyOf(7)).toBe('7');
    expect(groupKeyOf('')).toBeUndefined();
    expect(groupKeyOf({ a: 1 })).toBeUndefined();
  });
});
