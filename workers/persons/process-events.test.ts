import { describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { distinctIdsToLoad, processEvents, type SourceEvent } from './process-events.js';
import { distinctIdKey, personUuidFor, PersonWorkspace, type PersonState } from './person-workspace.js';

let n = 0;
function ev(event: string, distinctId: string, properties: Record<string, unknown> = {}): SourceEvent {
  n++;
  const e: CapturedEvent = {
    uuid: `0190a7a0-0000-7000-8000-${String(n).padStart(12, '0')}`,
    event,
    distinct_id: distinctId,
    properties,
    timestamp: new Date(Date.UTC(2024, 0, 1, 0, 0, n)).toISOString(),
    now: '2024-01-01T00:00:00.000Z',
    token: 't',
    project_id: 1,
  };
  return { projectId: 1, event: e };
}

function person(distinctId: string, extra: Partial<PersonState> = {}): PersonState {
  return {
    uuid: personUuidFor(1, distinctId),
    projectId: 1,
    properties: {},
    isIdentified: false,
    createdAt: '2023-01-01T00:00:00.000Z',
    version: 3,
    ...extra,
  };
}

/** A workspace that knows `existing` persons (by their first distinct id) and no one else. */
function workspaceFor(events: SourceEvent[], existing: Record<string, PersonState> = {}): PersonWorkspace {
  const lookups = new Map<string, string | null>();
  const persons = new Map<string, PersonState>();
  for (const e of events) for (const id of distinctIdsToLoad(e)) lookups.set(distinctIdKey(1, id), null);
  for (const [id, p] of Object.entries(existing)) {
    lookups.set(distinctIdKey(1, id), p.uuid);
    persons.set(p.uuid, p);
  }
  return new PersonWorkspace(lookups, persons);
}

describe('process events', () => {
  it('process - a new person gets a deterministic uuid and is inserted once with its final properties', () => {
    const events = [ev('a', 'u', { $set: { x: 1 } }), ev('b', 'u', { $set_once: { y: 2 } })];
    const ws = workspaceFor(events);
    const r = processEvents(events, ws, () => undefined);
    const w = ws.writes();
    expect(r.outputs.map((o) => o?.person_id)).toEqual([personUuidFor(1, 'u'), personUuidFor(1, 'u')]);
    expect(w.inserts).toEqual([expect.objectContaining({ uuid: personUuidFor(1, 'u'), properties: { x: 1, y: 2 }, version: 0 })]);
    expect(w.updates).toEqual([]);
    expect(w.newDistinctIds).toEqual([{ projectId: 1, distinctId: 'u', personUuid: personUuidFor(1, 'u') }]);
  });

  it('process - an existing person is updated once per batch with version + 1; no change means no write', () => {
    const events = [ev('a', 'u', { $set: { x: 1 } }), ev('b', 'u', { $set: { x: 2 } }), ev('c', 'v', { $set: { same: 1 } })];
    const ws = workspaceFor(events, { u: person('u'), v: person('v', { properties: { same: 1 } }) });
    processEvents(events, ws, () => undefined);
    const w = ws.writes();
    expect(w.updates).toHaveLength(1);
    expect(w.updates[0]).toMatchObject({ expectedVersion: 3, state: { properties: { x: 2 }, version: 4 } });
  });

  it('process - merge chains inside one batch collapse: every id ends on the last target, in one move each', () => {
    const a = person('a', { createdAt: '2020-01-01T00:00:00.000Z', properties: { from: 'a', shared: 'a' } });
    const b = person('b', { properties: { from: 'b' } });
    const c = person('c', { version: 9, properties: { shared: 'c' } });
    const events = [
      ev('$identify', 'b', { $anon_distinct_id: 'a' }), // a → b
      ev('$identify', 'c', { $anon_distinct_id: 'b' }), // b (with a) → c: refused, b is identified now
      ev('$merge_dangerously', 'c', { alias: 'b' }), // b → c regardless
      ev('after', 'a'),
    ];
    const ws = workspaceFor(events, { a, b, c });
    const r = processEvents(events, ws, () => undefined);
    const w = ws.writes();
    expect(r.warnings.map((x) => x.type)).toEqual(['cannot_merge_already_identified']);
    expect(r.outputs[3]?.person_id).toBe(c.uuid);
    expect(w.deletes.map((d) => d.uuid).sort()).toEqual([a.uuid, b.uuid].sort());
    expect(w.moves).toEqual(expect.arrayContaining([{ from: a.uuid, to: c.uuid }, { from: b.uuid, to: c.uuid }]));
    const final = w.updates.find((u) => u.state.uuid === c.uuid)!;
    expect(final.expectedVersion).toBe(9);
    expect(final.state.version).toBe(10);
    expect(final.state.properties).toEqual({ from: 'b', shared: 'c' });
    expect(final.state.createdAt).toBe('2020-01-01T00:00:00.000Z');
    expect(final.state.isIdentified).toBe(true);
    expect(w.mappings.get(distinctIdKey(1, 'a'))).toBe(c.uuid);
  });

  it('process - the cache learns the ids a batch gave a person or moved, not those it only looked up', () => {
    const known = person('known');
    const events = [ev('clicked', 'known'), ev('$identify', 'known', { $anon_distinct_id: 'anon' }), ev('clicked', 'fresh')];
    const ws = workspaceFor(events, { known });
    processEvents(events, ws, () => undefined);
    const w = ws.writes();
    expect(Object.fromEntries(w.mappings)).toEqual({
      [distinctIdKey(1, 'anon')]: known.uuid,
      [distinctIdKey(1, 'fresh')]: personUuidFor(1, 'fresh'),
    });
  });

  it('process - a person created and merged away in the same batch is never inserted', () => {
    const events = [ev('clicked', 'anon'), ev('clicked', 'user'), ev('$identify', 'user', { $anon_distinct_id: 'anon' })];
    const ws = workspaceFor(events);
    processEvents(events, ws, () => undefined);
    const w = ws.writes();
    expect(w.inserts.map((p) => p.uuid)).toEqual([personUuidFor(1, 'user')]);
    expect(w.deletes).toEqual([]);
    expect(w.newDistinctIds.map((d) => [d.distinctId, d.personUuid]).sort()).toEqual(
      [
        ['anon', personUuidFor(1, 'user')],
        ['user', personUuidFor(1, 'user')],
      ].sort(),
    );
  });

  it('process - $create_alias with one known id adds the other id and bumps the person', () => {
    const events = [ev('$create_alias', 'known', { alias: 'new-alias' })];
    const ws = workspaceFor(events, { known: person('known') });
    processEvents(events, ws, () => undefined);
    const w = ws.writes();
    expect(w.newDistinctIds).toEqual([{ projectId: 1, distinctId: 'new-alias', personUuid: personUuidFor(1, 'known') }]);
    expect(w.updates[0]).toMatchObject({ expectedVersion: 3, state: { version: 4, isIdentified: true } });
  });

  it('process - $groupidentify merges $group_set per group in order, keeps the first created_at, sorts for locking', () => {
    const events = [
      ev('$groupidentify', 'u', { $group_type: 'org', $group_key: 'z', $group_set: { a: 1, b: 1 } }),
      ev('$groupidentify', 'u', { $group_type: 'org', $group_key: 'a', $group_set: {} }),
      ev('$groupidentify', 'u', { $group_type: 'org', $group_key: 'z', $group_set: { b: 2 } }),
    ];
    const ws = workspaceFor(events);
    const r = processEvents(events, ws, (_p, t) => (t === 'org' ? 2 : undefined));
    expect(r.groups.map((g) => [g.groupKey, g.properties])).toEqual([
      ['a', {}],
      ['z', { a: 1, b: 2 }],
    ]);
    expect(r.groups[1]!.createdAt).toBe(events[0]!.event.timestamp);
    expect(r.untouched).toEqual([false, false, false]);
  });

  it('process - untouched marks the lines that only gain person_id', () => {
    const events = [ev('plain', 'u', { x: 1 }), ev('grouped', 'u', { $groups: { org: 'k' } }), ev('p', 'u', { $process_person_profile: false })];
    const ws = workspaceFor(events);
    const r = processEvents(events, ws, () => 0);
    expect(r.untouched).toEqual([true, false, true]);
    expect(r.outputs[1]!.properties.$group_0).toBe('k');
  });
});
