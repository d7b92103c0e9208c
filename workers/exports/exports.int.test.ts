// The exports role against real servers: nats-server, PostgreSQL, s3rver; events go through the
// persons role onto PROCESSED first, as in production.
import { gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { startExportRig, type ExportRig } from '../../test/exports/harness.js';
import { capture, publishEvents, waitForProcessed } from '../../test/workers/harness.js';

let rig: ExportRig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

/** `count` events of project 1 with timestamps spread evenly over [from, to). */
function eventsBetween(count: number, from: string, to: string, names = ['pageview', 'signup', 'click']): CapturedEvent[] {
  const start = Date.parse(from);
  const step = (Date.parse(to) - start) / count;
  return Array.from({ length: count }, (_, i) =>
    capture(1, names[i % names.length]!, `user-${i % 37}`, { i, $current_url: 'https://example.com/' }, { timestamp: new Date(start + Math.floor(i * step)).toISOString() }),
  );
}

function s3Destination(r: ExportRig, config: Record<string, unknown> = {}) {
  return {
    type: 'S3',
    config: {
      bucket_name: 'exports',
      region: 'us-east-1',
      prefix: 'posthog/{year}-{month}',
      endpoint_url: r.s3.endpoint,
      aws_access_key_id: r.s3.accessKeyId,
      aws_secret_access_key: r.s3.secretAccessKey,
      compression: 'gzip',
      ...config,
    },
  };
}

function jsonLines(body: Buffer, gzip: boolean): Array<Record<string, unknown>> {
  const text = (gzip ? gunzipSync(body) : body).toString('utf8');
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('exports', () => {
  it('exports - a backfill to S3 writes one gzip JSONLines object per interval, each event of it once, read back', async () => {
    rig = await startExportRig();
    const sent = eventsBetween(300, '2024-05-01T12:00:00Z', '2024-05-01T14:00:00Z');
    await publishEvents(rig.js, sent);
    await waitForProcessed(rig.nc, sent.length);

    const record = await rig.putExport({ id: crypto.randomUUID(), destination: s3Destination(rig), interval: 'hour' });
    const backfillId = await rig.backfill(record, '2024-05-01T12:00:00.000Z', '2024-05-01T14:00:00.000Z');
    for (const start of ['2024-05-01T12:00:00.000Z', '2024-05-01T13:00:00.000Z']) {
      await rig.waitForRun(`backfill run ${start} completed`, (l) => l.backfill_id === backfillId && l.data_interval_start === start && l.status === 'Completed');
    }
    const keys = await rig.s3.list('exports');
    expect(keys).toEqual([
      `posthog/2024-05/2024-05-01T12:00:00+00:00-2024-05-01T13:00:00+00:00-backfill-${backfillId}.jsonl.gz`,
      `posthog/2024-05/2024-05-01T13:00:00+00:00-2024-05-01T14:00:00+00:00-backfill-${backfillId}.jsonl.gz`,
    ]);
    const first = jsonLines(await rig.s3.get('exports', keys[0]!), true);
    const second = jsonLines(await rig.s3.get('exports', keys[1]!), true);
    const inHour = (e: CapturedEvent, hour: number) => new Date(e.timestamp).getUTCHours() === hour;
    expect(first.map((l) => l.uuid).sort()).toEqual(sent.filter((e) => inHour(e, 12)).map((e) => e.uuid).sort());
    expect(second.map((l) => l.uuid).sort()).toEqual(sent.filter((e) => inHour(e, 13)).map((e) => e.uuid).sort());
    // The contract's fields, in a fixed order, timestamps as Python writes them.
    expect(Object.keys(first[0]!)).toEqual(['uuid', 'event', 'properties', 'distinct_id', 'team_id', 'timestamp', 'person_id', 'elements_chain', 'set', 'set_once', 'created_at', '_inserted_at']);
    const line = first.find((l) => l.uuid === sent[0]!.uuid)!;
    expect(line).toMatchObject({ event: 'pageview', distinct_id: 'user-0', team_id: 1, timestamp: '2024-05-01T12:00:00+00:00', properties: { i: 0 } });
    expect(line.person_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(line.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
    const done = rig.runs().filter((l) => l.backfill_id === backfillId && l.status === 'Completed');
    expect(done.map((l) => l.records_completed).sort()).toEqual([150, 150]);
  });
});
