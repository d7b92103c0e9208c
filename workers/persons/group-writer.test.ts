// What the group writer merges when batches of several shards wait for it together.
import { describe, expect, it } from 'vitest';
import { mergedGroups } from './group-writer.js';
import type { GroupUpsert } from './process-events.js';

const group = (properties: GroupUpsert['properties'], createdAt: string): GroupUpsert => ({ projectId: 1, groupTypeIndex: 0, groupKey: 'acme', properties, createdAt });

describe('group writer', () => {
  it('merged groups - one row per group: later properties over earlier ones, the earliest created_at', () => {
    const rows = mergedGroups([[group({ plan: 'free', seats: 1 }, '2024-01-02T00:00:00Z')], [group({ plan: 'paid' }, '2024-01-01T00:00:00Z')]]);
    expect(rows).toEqual([group({ plan: 'paid', seats: 1 }, '2024-01-01T00:00:00Z')]);
  });

  it('merged groups - a "__proto__" key of a later batch ($group_set is the client\'s) is written as a key, not lost', () => {
    // As JSON.parse made it from the event: an own key.
    const later = JSON.parse('{"__proto__":{"tier":"gold"},"seats":2}') as GroupUpsert['properties'];
    const [row] = mergedGroups([[group({ plan: 'free' }, '2024-01-01T00:00:00Z')], [group(later, '2024-01-01T00:00:00Z')]]);
    expect(Object.getPrototypeOf(row!.properties)).toBe(Object.prototype);
    expect(row!.properties.tier).toBeUndefined();
    // What upsertGroups sends to PostgreSQL.
    expect(JSON.stringify(row!.properties)).toBe('{"plan":"free","__proto__":{"tier":"gold"},"seats":2}');
  });
});
