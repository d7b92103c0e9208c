// Group upserts of every shard of this worker go through one writer: concurrent batches touching
// the same groups would otherwise queue on each other's row locks for the length of their
// transactions. The writer merges what arrives while it writes, in arrival order, and writes it
// with one statement on its own connection. A batch waits for its groups before it commits, so a
// replayed batch re-applies them: a shallow merge of the same values is idempotent.
// If a merged write fails on its data, each batch's groups are written on their own, so one
// batch's bad group fails that batch alone.
import type pg from 'pg';
import { isTransientDbError } from '../coordination/index.js';
import { assignKeys } from './event-rules.js';
import { inLockOrder, type GroupUpsert } from './process-events.js';
import { upsertGroups } from './person-store.js';

interface Waiter {
  groups: readonly GroupUpsert[];
  /** Resolves with this batch's groups whose update the size cap refused. */
  resolve: (refused: GroupUpsert[]) => void;
  reject: (err: unknown) => void;
}

export class GroupWriter {
  private waiters: Waiter[] = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    /** Largest group properties stored (WORKER_MAX_PROPERTIES_BYTES). */
    private readonly maxBytes: number,
  ) {}

  /** Writes `groups`; resolves with those the size cap refused. */
  write(groups: readonly GroupUpsert[]): Promise<GroupUpsert[]> {
    if (groups.length === 0) return Promise.resolve([]);
    const done = new Promise<GroupUpsert[]>((resolve, reject) => this.waiters.push({ groups, resolve, reject }));
    this.flushing ??= this.flush();
    return done;
  }

  private async flush(): Promise<void> {
    try {
      while (this.waiters.length > 0) {
        const waiters = this.waiters;
        this.waiters = [];
        try {
          const refused = keysOf(await upsertGroups(this.pool, mergedGroups(waiters.map((w) => w.groups)), this.maxBytes));
          for (const w of waiters) w.resolve(w.groups.filter((g) => refused.has(keyOf(g))));
        } catch (err) {
          if (waiters.length === 1 || isTransientDbError(err)) {
            for (const w of waiters) w.reject(err);
            continue;
          }
          for (const w of waiters) {
            await upsertGroups(this.pool, sorted(w.groups), this.maxBytes).then(w.resolve, w.reject);
          }
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }
}

function keyOf(g: GroupUpsert): string {
  return `${g.projectId}:${g.groupTypeIndex}:${g.groupKey}`;
}

function keysOf(groups: readonly GroupUpsert[]): Set<string> {
  return new Set(groups.map(keyOf));
}

/** The groups of every waiting batch in arrival order, one row per group: later properties over earlier ones, the earliest created_at. */
export function mergedGroups(batches: readonly (readonly GroupUpsert[])[]): GroupUpsert[] {
  const byKey = new Map<string, GroupUpsert>();
  for (const groups of batches) {
    for (const g of groups) {
      const known = byKey.get(keyOf(g));
      if (!known) byKey.set(keyOf(g), { ...g, properties: { ...g.properties } });
      else {
        assignKeys(known.properties, g.properties);
        if (Date.parse(g.createdAt) < Date.parse(known.createdAt)) known.createdAt = g.createdAt;
      }
    }
  }
  return sorted([...byKey.values()]);
}

/** In one order for every writer, so concurrent writes lock group rows in the same order. */
function sorted(groups: readonly GroupUpsert[]): GroupUpsert[] {
  return [...groups].sort(inLockOrder);
}
