// Hot persons of this worker, shared by its shards. Never trusted blindly: every batch checks the
// cached versions against Postgres (one query for the whole batch), so a person changed or merged
// away by another worker is reloaded. Updated only after a batch commits.
import { LRUCache } from 'lru-cache';
import { copyPerson, type PersonState, type PersonWrites } from './person-workspace.js';

export class PersonCache {
  private readonly persons: LRUCache<string, PersonState> | undefined;
  private readonly distinctIds: LRUCache<string, string> | undefined;

  constructor(size: number) {
    if (size > 0) {
      this.persons = new LRUCache({ max: size });
      // People have a few distinct ids each; keep room for them.
      this.distinctIds = new LRUCache({ max: size * 2 });
    }
  }

  /** The cached person of a distinct id key, if both the mapping and the person are known. */
  lookup(key: string): PersonState | undefined {
    const uuid = this.distinctIds?.get(key);
    return uuid === undefined ? undefined : this.persons?.get(uuid);
  }

  forgetPerson(uuid: string): void {
    this.persons?.delete(uuid);
  }

  forgetDistinctId(key: string): void {
    this.distinctIds?.delete(key);
  }

  remember(key: string, person: PersonState): void {
    if (!this.persons || !this.distinctIds) return;
    this.distinctIds.set(key, person.uuid);
    const cached = this.persons.get(person.uuid);
    if (!cached || cached.version <= person.version) this.persons.set(person.uuid, person);
  }

  /** After a commit: what the batch wrote is now the truth (unless a newer version is cached). */
  applyCommitted(writes: PersonWrites): void {
    if (!this.persons || !this.distinctIds) return;
    for (const uuid of writes.deleted) this.persons.delete(uuid);
    for (const person of writes.written) {
      const cached = this.persons.get(person.uuid);
      if (!cached || cached.version <= person.version) this.persons.set(person.uuid, copyPerson(person));
    }
    // Lookups already refreshed the recency of the keys they found: only new or moved ids are set.
    for (const [key, uuid] of writes.mappings) if (this.distinctIds.peek(key) !== uuid) this.distinctIds.set(key, uuid);
  }

  clear(): void {
    this.persons?.clear();
    this.distinctIds?.clear();
  }

  get size(): number {
    return this.persons?.size ?? 0;
  }
}
