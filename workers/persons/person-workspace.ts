// The persons and distinct ids one batch works on, in memory: loaded from Postgres (or the
// cache) at the start, changed event by event in stream order, and turned into a few set-based
// writes at the end. Nothing here talks to Postgres.
import { parse as parseUuid, v5 as uuidv5 } from 'uuid';
import type { Properties } from '../../lib/index.js';

export interface PersonState {
  uuid: string;
  projectId: number;
  properties: Properties;
  isIdentified: boolean;
  /** ISO 8601. */
  createdAt: string;
  version: number;
}

// Fixed namespace of person uuids: uuid v5 of "<projectId>:<distinctId>" (the id that created it).
// Given as bytes, with the name as UTF-8 bytes: the library otherwise parses the namespace twice
// and encodes the name through encodeURIComponent on every call (3.0 → 2.0 µs a new person).
const PERSON_NAMESPACE = parseUuid('a8f0e3c2-5d7b-4c1e-9f26-3b8e6d4a1c57');

/** A new person's uuid: the same input always gives the same uuid, so a replayed batch republishes identical lines. */
export function personUuidFor(projectId: number, distinctId: string): string {
  return uuidv5(Buffer.from(`${projectId}:${distinctId}`), PERSON_NAMESPACE);
}

/**
 * A copy with the fields in the order every PersonState is made in (as `{ ...person }` would not:
 * V8 gives spread copies a map of their own, and code that saw one map deoptimised at the other).
 */
export function copyPerson(p: PersonState): PersonState {
  return { uuid: p.uuid, projectId: p.projectId, properties: p.properties, isIdentified: p.isIdentified, createdAt: p.createdAt, version: p.version };
}

export function distinctIdKey(projectId: number, distinctId: string): string {
  return `${projectId}:${distinctId}`;
}

export interface PersonWrites {
  /** New persons, final state. */
  inserts: PersonState[];
  /** Existing persons whose row changes; `state.version` is the new version. */
  updates: { state: PersonState; expectedVersion: number }[];
  /** Existing persons merged away. */
  deletes: { uuid: string; expectedVersion: number }[];
  /** Distinct ids that had no person before this batch. */
  newDistinctIds: { projectId: number; distinctId: string; personUuid: string }[];
  /** Every distinct id of a deleted person moves to the person it was (finally) merged into. */
  moves: { from: string; to: string }[];
  /**
   * Final distinct id → person of every key this batch gave a person or moved to another (for the
   * cache; keys it only looked up are in the cache already, put there when they were loaded).
   */
  mappings: Map<string, string>;
  /** Final state of every person this batch wrote (for the cache). */
  written: PersonState[];
  deleted: string[];
}

export class UnloadedDistinctIdError extends Error {
  override name = 'UnloadedDistinctIdError';
}

export class PersonWorkspace {
  /** Every key the batch looked at or linked: its person's uuid, or null when it has none. */
  private readonly didToPerson: Map<string, string | null>;
  /** Person → its keys; only merges need it, so it is built at the first one. */
  private personKeys: Map<string, Set<string>> | undefined;
  private readonly persons = new Map<string, PersonState>();
  /** Version in Postgres of every person that existed before the batch. */
  private readonly original = new Map<string, number>();
  private readonly created = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly deleted = new Set<string>();
  private readonly mergedInto = new Map<string, string>();
  private readonly addedKeys = new Map<string, { projectId: number; distinctId: string }>();
  /** Keys whose person changed by a merge. */
  private readonly movedKeys = new Set<string>();

  /**
   * `lookups` holds every key the batch will ask about: key → person uuid, or null when the
   * distinct id has no person. `persons` holds the state of every person named there.
   */
  constructor(lookups: ReadonlyMap<string, string | null>, persons: ReadonlyMap<string, PersonState>) {
    // Thousands of keys per batch: one bulk copy, then one pass over the (fewer) persons.
    this.didToPerson = new Map(lookups);
    for (const [key, uuid] of lookups) {
      if (uuid !== null && !persons.has(uuid)) throw new Error(`person ${uuid} of ${key} was not loaded`);
    }
    for (const [uuid, person] of persons) {
      this.persons.set(uuid, copyPerson(person));
      this.original.set(uuid, person.version);
    }
  }

  private keysOf(uuid: string): Set<string> {
    if (!this.personKeys) {
      this.personKeys = new Map();
      for (const [key, owner] of this.didToPerson) if (owner !== null) this.keysOfBuilt(owner).add(key);
    }
    return this.keysOfBuilt(uuid);
  }

  private keysOfBuilt(uuid: string): Set<string> {
    let keys = this.personKeys!.get(uuid);
    if (!keys) this.personKeys!.set(uuid, (keys = new Set()));
    return keys;
  }

  personOf(projectId: number, distinctId: string): PersonState | undefined {
    const key = distinctIdKey(projectId, distinctId);
    const uuid = this.didToPerson.get(key);
    if (uuid === undefined) throw new UnloadedDistinctIdError(`distinct id ${key} was not loaded for this batch`);
    return uuid === null ? undefined : this.persons.get(uuid);
  }

  getOrCreate(projectId: number, distinctId: string, createdAt: string): PersonState {
    return this.personOf(projectId, distinctId) ?? this.create(projectId, distinctId, createdAt);
  }

  create(projectId: number, distinctId: string, createdAt: string): PersonState {
    const uuid = personUuidFor(projectId, distinctId);
    const person: PersonState = { uuid, projectId, properties: {}, isIdentified: false, createdAt, version: 0 };
    this.persons.set(uuid, person);
    this.created.add(uuid);
    this.link(person, projectId, distinctId);
    return person;
  }

  /** Gives a distinct id without a person to `person`. */
  addDistinctId(person: PersonState, projectId: number, distinctId: string): void {
    this.link(person, projectId, distinctId);
    // A person that gains an id is written (version bump), so a concurrent merge of it elsewhere is detected.
    this.dirty.add(person.uuid);
  }

  private link(person: PersonState, projectId: number, distinctId: string): void {
    const key = distinctIdKey(projectId, distinctId);
    if (this.didToPerson.get(key)) throw new Error(`distinct id ${key} already has a person`);
    this.didToPerson.set(key, person.uuid);
    if (this.personKeys) this.keysOfBuilt(person.uuid).add(key);
    this.addedKeys.set(key, { projectId, distinctId });
  }

  setProperties(person: PersonState, properties: Properties): void {
    person.properties = properties;
    this.dirty.add(person.uuid);
  }

  markIdentified(person: PersonState): void {
    if (person.isIdentified) return;
    person.isIdentified = true;
    this.dirty.add(person.uuid);
  }

  /**
   * Merges `source` into `target`: target keeps its values over the source's, the oldest
   * created_at, is identified, and takes every distinct id of the source; the source is deleted.
   */
  merge(source: PersonState, target: PersonState): void {
    if (source.uuid === target.uuid) return;
    target.properties = { ...source.properties, ...target.properties };
    target.isIdentified = true;
    if (Date.parse(source.createdAt) < Date.parse(target.createdAt)) target.createdAt = source.createdAt;
    target.version = Math.max(source.version, target.version);
    this.dirty.add(target.uuid);
    const keys = this.keysOf(source.uuid);
    const targetKeys = this.keysOf(target.uuid);
    for (const key of keys) {
      this.didToPerson.set(key, target.uuid);
      targetKeys.add(key);
      this.movedKeys.add(key);
    }
    this.personKeys!.delete(source.uuid);
    this.persons.delete(source.uuid);
    this.deleted.add(source.uuid);
    this.mergedInto.set(source.uuid, target.uuid);
  }

  private finalOf(uuid: string): string {
    let current = uuid;
    for (let next = this.mergedInto.get(current); next !== undefined; next = this.mergedInto.get(current)) current = next;
    return current;
  }

  /** True when the batch changed nothing about persons (custom events of known persons). */
  get unchanged(): boolean {
    return this.created.size === 0 && this.dirty.size === 0 && this.deleted.size === 0;
  }

  writes(): PersonWrites {
    const w: PersonWrites = {
      inserts: [],
      updates: [],
      deletes: [],
      newDistinctIds: [],
      moves: [],
      mappings: new Map(),
      written: [],
      deleted: [],
    };
    for (const uuid of this.deleted) {
      const expectedVersion = this.original.get(uuid);
      if (expectedVersion === undefined) continue; // created and merged away within the batch
      w.deletes.push({ uuid, expectedVersion });
      w.moves.push({ from: uuid, to: this.finalOf(uuid) });
      w.deleted.push(uuid);
    }
    for (const uuid of this.created) {
      const person = this.persons.get(uuid);
      if (!person) continue;
      w.inserts.push(person);
      w.written.push(person);
    }
    for (const uuid of this.dirty) {
      const person = this.persons.get(uuid);
      const expectedVersion = this.original.get(uuid);
      if (!person || expectedVersion === undefined) continue;
      person.version = Math.max(person.version, expectedVersion) + 1;
      w.updates.push({ state: person, expectedVersion });
      w.written.push(person);
    }
    for (const [key, { projectId, distinctId }] of this.addedKeys) {
      const uuid = this.didToPerson.get(key)!;
      w.newDistinctIds.push({ projectId, distinctId, personUuid: this.finalOf(uuid) });
    }
    for (const key of [...this.addedKeys.keys(), ...this.movedKeys]) w.mappings.set(key, this.didToPerson.get(key)!);
    return w;
  }
}
