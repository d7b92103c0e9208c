import { describe, expect, it } from 'vitest';
import { batchHead, bodySize, buildBody, itemSize } from './batch.js';

describe('import batch', () => {
  it('import batch - builds a historical /batch/ body from records as they are, sized exactly', () => {
    const head = batchHead('phc_"key');
    const items = ['{"event":"a","distinct_id":"1"}', '{ "event" : "b", "distinct_id":"2" }'].map((t, i) => ({ position: i + 1, line: i + 1, bytes: Buffer.from(t) }));
    const body = buildBody(head, items);
    expect(JSON.parse(body.toString())).toEqual({
      api_key: 'phc_"key',
      historical_migration: true,
      batch: [
        { event: 'a', distinct_id: '1' },
        { event: 'b', distinct_id: '2' },
      ],
    });
    expect(body.length).toBe(bodySize(head, items.length, items.reduce((n, i) => n + i.bytes.length, 0)));
  });

  it('import batch - splices a uuid in as the first key of records without one, and sizes it', () => {
    const head = batchHead('k');
    const uuid = '00000000-0000-8000-8000-000000000001';
    const items = [
      { position: 1, line: 1, bytes: Buffer.from('{"event":"a"}'), uuid },
      { position: 2, line: 2, bytes: Buffer.from('{\n  "event": "é"\n}'), uuid },
      { position: 3, line: 3, bytes: Buffer.from('{"event":"c","uuid":"x"}') },
    ];
    const body = buildBody(head, items);
    expect(JSON.parse(body.toString()).batch).toEqual([{ uuid, event: 'a' }, { uuid, event: 'é' }, { event: 'c', uuid: 'x' }]);
    expect(body.length).toBe(bodySize(head, items.length, items.reduce((n, i) => n + itemSize(i), 0)));
  });
});
