// Group upserts of every shard of this worker go through one writer: concurrent batches touching
// the same groups would otherwise queue on each other's row locks for the length of their
// transactions. The writer merges what arrives while it writes, in arrival order, and writes it
// with one statement on its own connection. A batch waits for its groups before it commits, so a
// replayed batch re-applies them: a shallow merge of the same values is idempotent.
import type pg from 'pg';
import type { GroupUpsert } from './process-events.js';
import { upsertGroups } from './person-store.js';

export class GroupWriter {
  private pending = new Map<string, GroupUpsert>();
  private waiters: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private flushing: Promise<void> | undefined;

  constructor(private readonly pool: pg.Pool) {}

  write(groups: readonly GroupUpsert[]): Promise<void> {
    if (groups.length === 0) return Promise.resolve();
    for (const g of groups) {
      const key = `${g.projectId}:${g.groupTypeIndex}:${g.groupKey}`;
      const known = this.pending.get(key);
      if (!known) this.pending.set(key, { ...g, properties: { ...g.properties } });
      else {
        Object.assign(known.properties, g.properties);
        if (Date.parse(g.createdAt) < Date.parse(known.createdAt)) known.createdAt = g.createdAt;
      }
    }
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    this.flushing ??= this.flush();
    return done;
  }

  private async flush(): Promise<void> {
    try {
      while (this.waiters.length > 0) {
        const groups = [...this.pending.values()].sort((a, b) =>
          a.projectId - b.projectId || a.groupTypeIndex - b.groupTypeIndex || (a.groupKey < b.groupKey ? -1 : a.groupKey > b.groupKey ? 1 : 0),
        );
        const waiters = this.waiters;
        this.pending = new Map();
        this.waiters = [];
        try {
          await upsertGroups(this.pool, groups);
          for (const w of waiters) w.resolve();
        } catch (err) {
          for (const w of waiters) w.reject(err);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }
}
