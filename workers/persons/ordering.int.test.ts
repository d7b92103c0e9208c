// Order per distinct id, and person merges racing across shards and workers.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { freshDatabase, startNats, waitFor } from '../../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, readProcessed, waitForCommitted, workerConfig, testDeps } from '../../test/workers/harness.js';
import { startWorker, type Worker } from '../index.js';

describe('worker ordering and merges', () => {
  it('order - preserved per distinct_id across 10k interleaved events while a second worker joins', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const databaseUrl = await freshDatabase();
    const workers: Worker[] = [await startWorker(workerConfig(nats.url, databaseUrl, { WORKER_BATCH_MAX_EVENTS: '300' }), testDeps())];
    try {
      const ids = 40;
      const next = new Map<string, number>();
      const realtime: CapturedEvent[] = [];
      const historical: CapturedEvent[] = [];
      for (let i = 0; i < 11_000; i++) {
        const id = `user-${(i * 7) % ids}`;
        const n = next.get(id) ?? 0;
        next.set(id, n + 1);
        const e = capture(9, i % 3 === 0 ? '$identify' : 'step', id, { n, $set: { last: n } });
        (i % 11 === 10 ? historical : realtime).push(e);
      }
      for (let i = 0; i < realtime.length; i += 500) {
        await publishEvents(js, realtime.slice(i, i + 500), { perMessage: 10 });
        await publishEvents(js, historical.slice(i / 10, i / 10 + 50), { perMessage: 10, kind: 'historical' });
        if (i === 5_000) workers.push(await startWorker(workerConfig(nats.url, databaseUrl, { WORKER_BATCH_MAX_EVENTS: '300' }), testDeps()));
      }
      expect(realtime.length).toBeGreaterThanOrEqual(10_000);
      const total = realtime.length + historical.length;
      let lines = await readProcessed(nc);
      await waitFor('all events processed', async () => (lines = await readProcessed(nc)).length >= total, 90_000, 250);
      expect(lines).toHaveLength(total);
      expect(workers[1]!.ownedShards().length).toBeGreaterThan(0);

      const historicalUuids = new Set(historical.map((e) => e.uuid));
      for (const subset of [lines.filter((l) => !historicalUuids.has(l.uuid)), lines.filter((l) => historicalUuids.has(l.uuid))]) {
        const seen = new Map<string, number[]>();
        for (const l of subset) {
          let list = seen.get(l.distinct_id);
          if (!list) seen.set(l.distinct_id, (list = []));
          list.push(l.properties.n as number);
        }
        for (const list of seen.values()) expect(list).toEqual([...list].sort((a, b) => a - b));
      }
      // Person properties end at the last event of each distinct id.
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      await waitForCommitted(db, [...realtime, ...historical]);
      const { rows } = await db.query<{ distinct_id: string; last: number }>(
        `SELECT d.distinct_id, (p.properties->>'last')::int AS last FROM person_distinct_ids d JOIN persons p ON p.uuid = d.person_uuid WHERE d.project_id = 9`,
      );
      expect(rows).toHaveLength(ids);
      // Realtime and historical streams are processed independently; the realtime stream holds the later events overall.
      const lastRealtime = new Map<string, number>();
      for (const e of realtime) lastRealtime.set(e.distinct_id, e.properties.n as number);
      const lastHistorical = new Map<string, number>();
      for (const e of historical) lastHistorical.set(e.distinct_id, e.properties.n as number);
      for (const r of rows) expect([lastRealtime.get(r.distinct_id), lastHistorical.get(r.distinct_id)]).toContain(r.last);
      await db.end();
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await nc.close();
    }
  });

  it('merges - $identify and $create_alias racing on different shards and workers leave one consistent person each', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const databaseUrl = await freshDatabase();
    const config = workerConfig(nats.url, databaseUrl, { WORKER_BATCH_MAX_EVENTS: '200' });
    const workers = await Promise.all([startWorker(config, testDeps()), startWorker(config, testDeps())]);
    try {
      const mains = 12;
      const anons = 360;
      const first: CapturedEvent[] = [];
      const second: CapturedEvent[] = [];
      for (let j = 0; j < anons; j++) {
        first.push(capture(10, '$pageview', `anon-${j}`, { $current_url: 'https://x/', $set: { [`seen_${j}`]: true } }));
      }
      for (let k = 0; k < mains; k++) first.push(capture(10, '$identify', `main-${k}`, { $set: { main: k } }));
      for (let j = 0; j < anons; j++) {
        const main = `main-${j % mains}`;
        // Both link anon-j to its main person, from two shards at once.
        second.push(capture(10, '$identify', main, { $anon_distinct_id: `anon-${j}` }));
        second.push(capture(10, '$create_alias', `anon-${j}`, { alias: main }));
        second.push(capture(10, 'after', `anon-${j}`));
      }
      await publishEvents(js, first, { perMessage: 5 });
      await waitFor('pageviews processed', async () => (await readProcessed(nc)).length >= first.length, 60_000, 250);
      await publishEvents(js, second, { perMessage: 3 });
      const total = first.length + second.length;
      await waitFor('all processed', async () => (await readProcessed(nc)).length >= total, 90_000, 250);

      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      await waitForCommitted(db, [...first, ...second]);
      const dangling = await db.query('SELECT d.distinct_id FROM person_distinct_ids d LEFT JOIN persons p ON p.uuid = d.person_uuid WHERE p.uuid IS NULL');
      expect(dangling.rows).toEqual([]);
      const { rows: persons } = await db.query<{ uuid: string; properties: Record<string, unknown>; is_identified: boolean; ids: string[] }>(
        `SELECT p.uuid, p.properties, p.is_identified, array_agg(d.distinct_id ORDER BY d.distinct_id) AS ids
         FROM persons p JOIN person_distinct_ids d ON d.person_uuid = p.uuid WHERE p.project_id = 10 GROUP BY p.uuid`,
      );
      expect(persons).toHaveLength(mains);
      for (const p of persons) {
        const k = p.properties.main as number;
        const expectedIds = [`main-${k}`];
        const expectedProps: Record<string, unknown> = { main: k };
        for (let j = k; j < anons; j += mains) {
          expectedIds.push(`anon-${j}`);
          expectedProps[`seen_${j}`] = true;
        }
        expect(p.ids).toEqual(expectedIds.sort());
        expect(p.properties).toEqual(expectedProps);
        expect(p.is_identified).toBe(true);
      }
      // Every event after the link carries the surviving person.
      const byMain = new Map(persons.map((p) => [p.properties.main as number, p.uuid]));
      const lines = await readProcessed(nc);
      for (const l of lines.filter((x) => x.event === 'after')) {
        expect(l.person_id).toBe(byMain.get(Number(l.distinct_id.slice(5)) % mains));
      }
      await db.end();
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await nc.close();
    }
  });
});
