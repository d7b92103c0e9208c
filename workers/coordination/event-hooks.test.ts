import { describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { EventHooks } from './event-hooks.js';

function event(name: string): { projectId: number; event: CapturedEvent } {
  const at = '2024-05-01T12:00:00.000Z';
  return { projectId: 1, event: { uuid: '0190f0e8-0000-7000-8000-000000000000', event: name, distinct_id: 'u', properties: {}, timestamp: at, now: at, token: 't', project_id: 1 } };
}

describe('event hooks', () => {
  it('event hooks - run in the order added, each seeing the events the ones before it replaced and dropped', async () => {
    const hooks = new EventHooks();
    const calls: string[] = [];
    hooks.add('first', (batch) => {
      calls.push(`first ${batch.stream}/${batch.shard}: ${batch.events.map((e) => e.event.event).join(',')}`);
      batch.events.forEach((e, i) => {
        if (e.event.event === 'drop me') batch.drop(i);
        else batch.replace(i, { ...e.event, properties: { seen: ['first'] } });
      });
    });
    hooks.add('second', async (batch) => {
      await Promise.resolve();
      calls.push(`second: ${batch.events.map((e) => `${e.event.event}${JSON.stringify(e.event.properties)}`).join(',')}`);
      batch.events.forEach((e, i) => batch.replace(i, { ...e.event, properties: { seen: [...(e.event.properties.seen as string[]), 'second'] } }));
    });
    const replaced: string[] = [];
    const left = await hooks.run({ stream: 'EVENTS', shard: 3 }, [event('a'), event('drop me'), event('b')], (entry, next, hook) => {
      replaced.push(`${hook}:${next.event}`);
      entry.event = next;
    });
    expect(calls).toEqual(['first EVENTS/3: a,drop me,b', 'second: a{"seen":["first"]},b{"seen":["first"]}']);
    expect(replaced).toEqual(['first:a', 'first:b', 'second:a', 'second:b']);
    expect(left.map((e) => [e.event.event, e.event.properties])).toEqual([
      ['a', { seen: ['first', 'second'] }],
      ['b', { seen: ['first', 'second'] }],
    ]);
  });

  it('event hooks - a removed hook no longer runs; an index outside the batch is refused', async () => {
    const hooks = new EventHooks();
    let ran = 0;
    const remove = hooks.add('counting', () => void ran++);
    hooks.add('careless', (batch) => batch.drop(5));
    remove();
    expect(hooks.size).toBe(1);
    await expect(hooks.run({ stream: 'EVENTS', shard: 0 }, [event('a')], () => undefined)).rejects.toThrow(/hook careless: no event 5/);
    expect(ran).toBe(0);
  });
});
