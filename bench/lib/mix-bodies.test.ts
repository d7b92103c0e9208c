import { describe, expect, it } from 'vitest';
import { isUuid } from '../../lib/index.js';
import { MixBodies, SENT_PROPERTY } from './mix-bodies.js';

interface Body {
  api_key: string;
  batch: { uuid: string; event: string; distinct_id: string; properties: Record<string, unknown> }[];
}

describe('bench mix bodies', () => {
  it('mix bodies - each body is a /batch/ of the realistic mix with fresh uuids and ids and its send time', () => {
    const bodies = new MixBodies('phc_k', { perRequest: 200, persons: 1_000 });
    const made = Array.from({ length: 12 }, (_, i) => JSON.parse(bodies.next(1_000 + i)) as Body);
    const uuids = new Set<string>();
    const anon = new Set<string>();
    for (const [i, body] of made.entries()) {
      expect(body.api_key).toBe('phc_k');
      expect(body.batch).toHaveLength(200);
      for (const e of body.batch) {
        expect(isUuid(e.uuid)).toBe(true);
        uuids.add(e.uuid);
        expect(e.properties[SENT_PROPERTY]).toBe(1_000 + i);
        if (e.event === '$identify') anon.add(e.properties.$anon_distinct_id as string);
      }
    }
    expect(uuids.size).toBe(12 * 200);
    expect(anon.size).toBe(12 * 20);
    const events = made.flatMap((b) => b.batch.map((e) => e.event));
    expect(events.filter((e) => e === '$identify')).toHaveLength(events.length / 10);
    expect(events.filter((e) => e === '$groupidentify')).toHaveLength(events.length / 20);
    // The custom events reach every known person over the templates' rotation.
    expect(new Set(made.flatMap((b) => b.batch.filter((e) => e.event === '$pageview').map((e) => e.distinct_id))).size).toBeGreaterThan(300);
  });

  it('mix bodies - two generators never make the same uuid', () => {
    const a = JSON.parse(new MixBodies('k', { perRequest: 10 }).next()) as Body;
    const b = JSON.parse(new MixBodies('k', { perRequest: 10 }).next()) as Body;
    expect(a.batch.map((e) => e.uuid)).not.toEqual(expect.arrayContaining([b.batch[0]!.uuid]));
  });
});
