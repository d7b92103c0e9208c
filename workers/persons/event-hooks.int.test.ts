// The extension point before person processing (coordination/event-hooks.ts), through a real
// worker: what the hooks leave is what persons are computed from and what PROCESSED holds.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { freshDatabase, startNats } from '../../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, testDeps, waitForCommitted, waitForProcessed, workerConfig } from '../../test/workers/harness.js';
import { EventHooks } from '../coordination/index.js';
import { startWorker } from '../index.js';

describe('event hooks', () => {
  it('event hooks - run in the order added on each batch before person processing: their changes reach persons and PROCESSED, dropped events neither', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const databaseUrl = await freshDatabase();
    const calls: string[] = [];
    const hooks = new EventHooks();
    hooks.add('tag', (batch) => {
      calls.push(`tag ${batch.events.map((e) => e.event.event).join(',')}`);
      batch.events.forEach((e, i) => {
        if (e.event.event === 'drop me') batch.drop(i);
        else batch.replace(i, { ...e.event, properties: { ...e.event.properties, stages: ['tag'] } });
      });
    });
    hooks.add('enrich', async (batch) => {
      await new Promise((r) => setTimeout(r, 5));
      calls.push(`enrich ${batch.events.map((e) => `${e.event.event}:${String(e.event.properties.stages)}`).join(',')}`);
      batch.events.forEach((e, i) =>
        batch.replace(i, { ...e.event, properties: { ...e.event.properties, stages: [...(e.event.properties.stages as string[]), 'enrich'], $set: { plan: 'pro' } } }),
      );
    });
    const worker = await startWorker(workerConfig(nats.url, databaseUrl), testDeps({ eventHooks: hooks }));
    const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    try {
      const events = [capture(3, 'first', 'hooked'), capture(3, 'drop me', 'hooked'), capture(3, 'second', 'hooked')];
      await publishEvents(js, events, { perMessage: 3 });
      const lines = await waitForProcessed(nc, 2);
      await waitForCommitted(db, [events[0]!, events[2]!]);
      expect(calls).toEqual(['tag first,drop me,second', 'enrich first:tag,second:tag']);
      expect(lines.map((l) => [l.event, l.properties.stages])).toEqual([
        ['first', ['tag', 'enrich']],
        ['second', ['tag', 'enrich']],
      ]);
      const { rows } = await db.query(
        "SELECT p.properties FROM persons p JOIN person_distinct_ids d ON d.person_uuid = p.uuid WHERE d.project_id = 3 AND d.distinct_id = 'hooked'",
      );
      expect(rows[0].properties).toEqual({ plan: 'pro' });
      // The dropped event is on PROCESSED neither now nor later.
      await new Promise((r) => setTimeout(r, 300));
      expect((await waitForProcessed(nc, 2)).map((l) => l.uuid)).toEqual([events[0]!.uuid, events[2]!.uuid]);
    } finally {
      await worker.stop();
      await db.end();
      await nc.close();
    }
  });
});
