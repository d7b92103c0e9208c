import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CapturedEvent, NatsConnection } from '../../lib/index.js';
import { freshDatabase, startNats, type NatsHandle } from '../../test/kit/index.js';
import {
  byUuid,
  capture,
  connectAndCreateStreams,
  publishEvents,
  readProcessed,
  waitForCommitted,
  workerConfig,
  testDeps,
  type ProcessedLine,
} from '../../test/workers/harness.js';
import { personUuidFor, startWorker, type Worker } from '../index.js';
import type { JetStreamClient } from '@nats-io/jetstream';

let nats: NatsHandle;
let nc: NatsConnection;
let js: JetStreamClient;
let db: pg.Pool;
let worker: Worker;
let nextProject = 100;

beforeAll(async () => {
  nats = await startNats();
  ({ nc, js } = await connectAndCreateStreams(nats.url));
  const url = await freshDatabase();
  db = new pg.Pool({ connectionString: url, max: 3 });
  worker = await startWorker(workerConfig(nats.url, url), testDeps());
});

afterAll(async () => {
  await worker?.stop();
  await db?.end();
  await nc?.close();
  await nats?.stop();
});

/** Publishes `events`, then a sentinel per distinct id, and waits until every sentinel is processed. */
async function run(events: CapturedEvent[]): Promise<Map<string, ProcessedLine>> {
  const sentinels = [...new Map(events.map((e) => [`${e.project_id}:${e.distinct_id}`, e])).values()].map((e) =>
    capture(e.project_id, 'sentinel', e.distinct_id, { $process_person_profile: false }),
  );
  // Read before publishing: a worker can process the new events before a read that comes after.
  const seen = new Set((await readProcessed(nc)).map((l) => l.msgId));
  await publishEvents(js, [...events, ...sentinels], { perMessage: 7 });
  const want = new Set(sentinels.map((s) => s.uuid));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const lines = await readProcessed(nc);
    if (sentinels.every((s) => lines.some((l) => l.uuid === s.uuid))) {
      await waitForCommitted(db, [...events, ...sentinels]);
      const mine = new Set(events.map((e) => `${e.project_id}:${e.uuid}`));
      return byUuid(lines.filter((l) => !want.has(l.uuid) && mine.has(`${l.project_id}:${l.uuid}`) && l.msgId.length > 0 && !seen.has(l.msgId)));
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('sentinels not processed in time');
}

async function personOf(projectId: number, distinctId: string) {
  const { rows } = await db.query(
    `SELECT p.uuid, p.properties, p.is_identified, p.version::int AS version, p.created_at
     FROM person_distinct_ids d JOIN persons p ON p.uuid = d.person_uuid WHERE d.project_id = $1 AND d.distinct_id = $2`,
    [projectId, distinctId],
  );
  return rows[0] as { uuid: string; properties: Record<string, unknown>; is_identified: boolean; version: number; created_at: Date } | undefined;
}

async function warningsOf(projectId: number) {
  const { rows } = await db.query('SELECT type, details, created_at FROM ingestion_warnings WHERE project_id = $1 ORDER BY id', [projectId]);
  return rows as { type: string; details: Record<string, unknown>; created_at: Date }[];
}

describe('worker semantics', () => {
  it('custom events - recorded with the person of their distinct id, created on first sight', async () => {
    const p = nextProject++;
    const a = capture(p, 'clicked', 'user-1', { button: 'buy' });
    const b = capture(p, 'clicked', 'user-1');
    const out = await run([a, b]);
    const person = await personOf(p, 'user-1');
    expect(person?.uuid).toBe(personUuidFor(p, 'user-1'));
    expect(out.get(a.uuid)?.person_id).toBe(person!.uuid);
    expect(out.get(b.uuid)?.person_id).toBe(person!.uuid);
    expect(out.get(a.uuid)?.properties).toEqual({ button: 'buy' });
    expect(person!.is_identified).toBe(false);
  });

  it('$identify - $set, $set_once (only missing keys) and $unset update person properties', async () => {
    const p = nextProject++;
    await run([
      capture(p, '$identify', 'u', { $set: { name: 'Ada', plan: 'free', tmp: 1 }, $set_once: { first_seen: 'monday' } }),
      capture(p, '$identify', 'u', { $set: { plan: 'pro' }, $set_once: { first_seen: 'tuesday', source: 'ad' }, $unset: ['tmp'] }),
    ]);
    const person = await personOf(p, 'u');
    expect(person?.properties).toEqual({ name: 'Ada', plan: 'pro', first_seen: 'monday', source: 'ad' });
    expect(person?.is_identified).toBe(true);
  });

  it('$identify - $unset given as an object removes its keys; any event may carry $set', async () => {
    const p = nextProject++;
    await run([
      capture(p, 'signed_up', 'u', { $set: { a: 1, b: 2, c: 3 } }),
      capture(p, '$identify', 'u', { $unset: { a: true, c: null } }),
    ]);
    expect((await personOf(p, 'u'))?.properties).toEqual({ b: 2 });
  });

  it('$identify - with $anon_distinct_id merges the anonymous person into the identified one', async () => {
    const p = nextProject++;
    const anonEvent = capture(p, '$pageview', 'anon-1', { $current_url: 'https://x/', $set: { referrer: 'ad', shared: 'anon' } });
    const userEvent = capture(p, 'logged_in', 'user-7', { $set: { email: 'u7@x', shared: 'user' } });
    await run([anonEvent, userEvent]);
    const anonBefore = await personOf(p, 'anon-1');
    const userBefore = await personOf(p, 'user-7');
    expect(anonBefore?.uuid).not.toBe(userBefore?.uuid);

    const identify = capture(p, '$identify', 'user-7', { $anon_distinct_id: 'anon-1', $set: { plan: 'pro' } });
    const out = await run([identify]);
    // Order holds per distinct id only: anon-1 lives on another shard, so its next event is sent after.
    const later = capture(p, 'clicked', 'anon-1');
    const outLater = await run([later]);
    const merged = await personOf(p, 'anon-1');
    expect(merged?.uuid).toBe(userBefore!.uuid);
    expect((await personOf(p, 'user-7'))?.uuid).toBe(userBefore!.uuid);
    expect(merged?.properties).toEqual({ referrer: 'ad', email: 'u7@x', shared: 'user', plan: 'pro' });
    expect(merged?.is_identified).toBe(true);
    expect(merged!.version).toBeGreaterThan(userBefore!.version);
    // The oldest created_at of the two is kept.
    expect(merged!.created_at.toISOString()).toBe(anonBefore!.created_at.toISOString());
    const { rowCount } = await db.query('SELECT 1 FROM persons WHERE uuid = $1', [anonBefore!.uuid]);
    expect(rowCount).toBe(0);
    expect(out.get(identify.uuid)?.person_id).toBe(userBefore!.uuid);
    expect(outLater.get(later.uuid)?.person_id).toBe(userBefore!.uuid);
  });

  it('$identify - an anonymous id without a person is added to the identified person', async () => {
    const p = nextProject++;
    await run([capture(p, '$identify', 'user-1', { $anon_distinct_id: 'fresh-anon' })]);
    const a = await personOf(p, 'fresh-anon');
    expect(a?.uuid).toBe((await personOf(p, 'user-1'))?.uuid);
  });

  it('$create_alias - the alias becomes another distinct id of the same person', async () => {
    const p = nextProject++;
    await run([capture(p, 'clicked', 'main-id')]);
    const before = await personOf(p, 'main-id');
    const alias = capture(p, '$create_alias', 'main-id', { alias: 'alias-id' });
    await run([alias]);
    const after = capture(p, 'clicked', 'alias-id');
    const out = await run([after]);
    expect((await personOf(p, 'alias-id'))?.uuid).toBe(before!.uuid);
    expect(out.get(after.uuid)?.person_id).toBe(before!.uuid);
  });

  it('$create_alias - neither id known: one person holds both', async () => {
    const p = nextProject++;
    await run([capture(p, '$create_alias', 'x1', { alias: 'x2' })]);
    const a = await personOf(p, 'x1');
    expect(a).toBeDefined();
    expect((await personOf(p, 'x2'))?.uuid).toBe(a!.uuid);
    expect(a!.uuid).toBe(personUuidFor(p, 'x2'));
  });

  it('$create_alias - the event\'s distinct id is merged into the alias, which becomes the main person', async () => {
    const p = nextProject++;
    await run([capture(p, 'clicked', 'device-1', { $set: { os: 'ios' } }), capture(p, 'clicked', 'account-1', { $set: { tier: 'gold' } })]);
    const alias = await personOf(p, 'account-1');
    const source = await personOf(p, 'device-1');
    const out = await run([capture(p, '$create_alias', 'device-1', { alias: 'account-1' }), capture(p, 'clicked', 'device-1')]);
    const merged = await personOf(p, 'device-1');
    expect(merged?.uuid).toBe(alias!.uuid);
    expect(merged?.properties).toEqual({ os: 'ios', tier: 'gold' });
    const { rowCount } = await db.query('SELECT 1 FROM persons WHERE uuid = $1', [source!.uuid]);
    expect(rowCount).toBe(0);
    expect([...out.values()].every((l) => l.person_id === alias!.uuid)).toBe(true);
  });

  it('$create_alias - refused with a warning for illegal ids (any casing, quoted, blank)', async () => {
    const p = nextProject++;
    const bad = ['anonymous', 'Guest', '"undefined"', "'null'", '   ', 'NaN', '[object Object]', '0'];
    await run(bad.map((alias, i) => capture(p, '$create_alias', `real-${i}`, { alias })));
    for (let i = 0; i < bad.length; i++) {
      const person = await personOf(p, `real-${i}`);
      expect(person).toBeDefined();
      expect(await personOf(p, bad[i]!)).toBeUndefined();
    }
    const warnings = await warningsOf(p);
    expect(warnings.filter((w) => w.type === 'cannot_merge_with_illegal_distinct_id')).toHaveLength(bad.length);
    expect(warnings.find((w) => w.details.sourceDistinctId === 'real-0')?.details).toMatchObject({
      illegalDistinctId: 'anonymous',
      targetDistinctId: 'anonymous',
      event: '$create_alias',
    });
    // Legal lookalikes are not refused: "none" is only illegal in exact casing, "NULL" is fine.
    await run([capture(p, '$create_alias', 'real-x', { alias: 'NULL' })]);
    expect((await personOf(p, 'NULL'))?.uuid).toBe((await personOf(p, 'real-x'))?.uuid);
  });

  it('$create_alias - refused with a warning when both persons are already identified', async () => {
    const p = nextProject++;
    await run([capture(p, '$identify', 'id-a', { $set: { a: 1 } }), capture(p, '$identify', 'id-b', { $set: { b: 1 } })]);
    const a = await personOf(p, 'id-a');
    const b = await personOf(p, 'id-b');
    await run([capture(p, '$create_alias', 'id-a', { alias: 'id-b' })]);
    expect((await personOf(p, 'id-a'))?.uuid).toBe(a!.uuid);
    expect((await personOf(p, 'id-b'))?.uuid).toBe(b!.uuid);
    const warnings = await warningsOf(p);
    expect(warnings.map((w) => w.type)).toEqual(['cannot_merge_already_identified']);
    expect(warnings[0]!.details).toMatchObject({ sourceDistinctId: 'id-a', targetDistinctId: 'id-b' });
    expect(warnings[0]!.created_at).toBeInstanceOf(Date);
  });

  it('$groupidentify - upserts the group, merges $group_set, keeps created_at and date_joined as given', async () => {
    const p = nextProject++;
    const joined = '2021-03-04T05:06:07.890+02:00';
    const first = capture(p, '$groupidentify', 'u', {
      $group_type: 'company',
      $group_key: 'acme',
      $group_set: { name: 'Acme', date_joined: joined, size: 10 },
      $set: { should: 'be stripped' },
    });
    await run([first]);
    const { rows: r1 } = await db.query('SELECT group_type_index, group_properties, created_at FROM groups WHERE project_id = $1', [p]);
    expect(r1).toHaveLength(1);
    expect(r1[0].group_properties).toEqual({ name: 'Acme', date_joined: joined, size: 10 });
    await run([capture(p, '$groupidentify', 'u', { $group_type: 'company', $group_key: 'acme', $group_set: { size: 11, plan: 'big' } })]);
    const { rows: r2 } = await db.query('SELECT group_type_index, group_properties, created_at FROM groups WHERE project_id = $1', [p]);
    expect(r2[0].group_properties).toEqual({ name: 'Acme', date_joined: joined, size: 11, plan: 'big' });
    expect(r2[0].created_at.toISOString()).toBe(r1[0].created_at.toISOString());
    expect(r2[0].created_at.toISOString()).toBe(first.timestamp);
    expect((await personOf(p, 'u'))?.properties).toEqual({});
    const { rows: types } = await db.query('SELECT group_type, group_type_index FROM group_type_mappings WHERE project_id = $1', [p]);
    expect(types).toEqual([{ group_type: 'company', group_type_index: 0 }]);
  });

  it('$groupidentify - a $group_key over 400 characters is refused with a warning; 400 is fine', async () => {
    const p = nextProject++;
    await run([
      capture(p, '$groupidentify', 'u', { $group_type: 'org', $group_key: 'k'.repeat(401), $group_set: { a: 1 } }),
      capture(p, '$groupidentify', 'u', { $group_type: 'org', $group_key: 'k'.repeat(400), $group_set: { a: 2 } }),
    ]);
    const { rows } = await db.query('SELECT length(group_key) AS len FROM groups WHERE project_id = $1', [p]);
    expect(rows).toEqual([{ len: 400 }]);
    expect((await warningsOf(p)).map((w) => w.type)).toEqual(['invalid_group_key']);
  });

  it('$groupidentify - at most 5 group types per project; the sixth is refused with a warning', async () => {
    const p = nextProject++;
    const types = ['t0', 't1', 't2', 't3', 't4', 't5'];
    await run(types.map((t) => capture(p, '$groupidentify', 'u', { $group_type: t, $group_key: 'k', $group_set: {} })));
    const { rows } = await db.query<{ group_type: string; group_type_index: number }>(
      'SELECT group_type, group_type_index FROM group_type_mappings WHERE project_id = $1 ORDER BY 2',
      [p],
    );
    expect(rows.map((r) => r.group_type)).toEqual(['t0', 't1', 't2', 't3', 't4']);
    expect(rows.map((r) => r.group_type_index)).toEqual([0, 1, 2, 3, 4]);
    const { rowCount } = await db.query('SELECT 1 FROM groups WHERE project_id = $1', [p]);
    expect(rowCount).toBe(5);
    expect((await warningsOf(p)).map((w) => w.type)).toEqual(['group_type_limit_reached']);
  });

  it('$groups - sets $group_<index> for group types, never creates a group', async () => {
    const p = nextProject++;
    await run([capture(p, '$groupidentify', 'u', { $group_type: 'company', $group_key: 'acme', $group_set: {} })]);
    const e = capture(p, 'clicked', 'u', { $groups: { company: 'other-co', project: 42, bad: { no: 1 } } });
    const out = await run([e]);
    const props = out.get(e.uuid)!.properties;
    expect(props.$group_0).toBe('other-co');
    expect(props.$group_1).toBe('42');
    expect(props.$group_2).toBeUndefined();
    const { rows } = await db.query('SELECT group_key FROM groups WHERE project_id = $1', [p]);
    expect(rows).toEqual([{ group_key: 'acme' }]);
  });

  it('$process_person_profile false - personless: no person, person updates stripped, person-only events dropped with a warning', async () => {
    const p = nextProject++;
    const plain = capture(p, 'viewed', 'ghost', { $process_person_profile: false, $set: { a: 1 }, $unset: ['b'] }, { $set: { top: 1 } });
    const identify = capture(p, '$identify', 'ghost', { $process_person_profile: false, $anon_distinct_id: 'x' });
    const alias = capture(p, '$create_alias', 'ghost', { $process_person_profile: false, alias: 'y' });
    const group = capture(p, '$groupidentify', 'ghost', { $process_person_profile: false, $group_type: 'c', $group_key: 'k' });
    const invalid = capture(p, 'viewed', 'ghost2', { $process_person_profile: 'nope' });
    const out = await run([plain, identify, alias, group, invalid]);
    const line = out.get(plain.uuid)!;
    expect(line.person_id).toBeUndefined();
    expect(line.properties.$set).toBeUndefined();
    expect(line.properties.$unset).toBeUndefined();
    expect((line as unknown as Record<string, unknown>).$set).toBeUndefined();
    expect(out.has(identify.uuid)).toBe(false);
    expect(out.has(alias.uuid)).toBe(false);
    expect(out.has(group.uuid)).toBe(false);
    expect(await personOf(p, 'ghost')).toBeUndefined();
    // A non-boolean value counts as true, with a warning.
    expect(out.get(invalid.uuid)?.person_id).toBe(personUuidFor(p, 'ghost2'));
    const types = (await warningsOf(p)).map((w) => w.type);
    expect(types.filter((t) => t === 'invalid_event_when_process_person_profile_is_false')).toHaveLength(3);
    expect(types).toContain('invalid_process_person_profile');
    const { rowCount } = await db.query('SELECT 1 FROM groups WHERE project_id = $1', [p]);
    expect(rowCount).toBe(0);
  });

  it('required properties - $pageview, $screen and survey events without them are stored with a warning', async () => {
    const p = nextProject++;
    const events = [
      capture(p, '$pageview', 'u', {}),
      capture(p, '$pageview', 'u', { $current_url: 'https://ok/' }),
      capture(p, '$screen', 'u', {}),
      capture(p, '$screen', 'u', { $screen_name: 'Home' }),
      capture(p, 'survey sent', 'u', { $survey_response: 'yes' }),
      capture(p, 'survey shown', 'u', { $survey_id: 's1' }),
      capture(p, 'survey dismissed', 'u', {}),
    ];
    const out = await run(events);
    for (const e of events) expect(out.has(e.uuid)).toBe(true);
    const warnings = await warningsOf(p);
    expect(warnings.map((w) => [w.type, w.details.event, w.details.property])).toEqual([
      ['missing_required_property', '$pageview', '$current_url'],
      ['missing_required_property', '$screen', '$screen_name'],
      ['missing_required_property', 'survey sent', '$survey_id'],
      ['missing_required_property', 'survey dismissed', '$survey_id'],
    ]);
    expect(warnings[0]!.details.eventUuid).toBe(events[0]!.uuid);
  });

  it('top-level $set and $set_once win over properties.$set and properties.$set_once', async () => {
    const p = nextProject++;
    const e = capture(
      p,
      '$identify',
      'u',
      { $set: { a: 'inner', b: 'inner' }, $set_once: { c: 'inner' } },
      { $set: { a: 'top' }, $set_once: { c: 'top', d: 'top' } },
    );
    const out = await run([e]);
    expect((await personOf(p, 'u'))?.properties).toEqual({ a: 'top', b: 'inner', c: 'top', d: 'top' });
    const line = out.get(e.uuid)!;
    expect(line.properties.$set).toEqual({ a: 'top', b: 'inner' });
    expect((line as unknown as Record<string, unknown>).$set).toBeUndefined();
  });

  it('dedup - an event uuid already processed for a project is skipped, even in another message', async () => {
    const p = nextProject++;
    const e = capture(p, 'clicked', 'u', { $set: { n: 1 } });
    await run([e]);
    const again = await run([{ ...e, properties: { $set: { n: 2 } } }, { ...e }]);
    expect(again.size).toBe(0);
    expect((await personOf(p, 'u'))?.properties).toEqual({ n: 1 });
    const lines = (await readProcessed(nc)).filter((l) => l.uuid === e.uuid);
    expect(lines).toHaveLength(1);
    // The same uuid in another project is another event.
    const other = await run([{ ...e, project_id: p + 1000 }]);
    expect(other.size).toBe(1);
  });

  it('output - processed lines keep the captured fields and go to processed.<project>.<shard>', async () => {
    const p = nextProject++;
    const e = capture(p, 'clicked', 'someone', { x: 1 }, { ip: '1.2.3.4', sent_at: '2024-05-01T12:00:00.000Z' });
    const out = await run([e]);
    const line = out.get(e.uuid)!;
    const { subject, msgId, ...rest } = line;
    expect(rest).toEqual({ ...e, person_id: personUuidFor(p, 'someone') });
    const { shardOf } = await import('../../lib/index.js');
    expect(subject).toBe(`processed.${p}.${shardOf('someone', 16)}`);
    expect(msgId).toMatch(/^EVENTS:\d+:\d+:\d+-\d+$/);
  });

  it('malformed lines - become invalid_event warnings and never stop the shard', async () => {
    const p = nextProject++;
    const { headers } = await import('@nats-io/transport-node');
    const { shardOf } = await import('../../lib/index.js');
    const good = capture(p, 'ok', 'm-user');
    const h = headers();
    h.set('Spate-Events', '4');
    // A raw NUL, and a \u0000 escape: the warnings quoting these lines must be storable too.
    const bad = 'not json\u0000\n{"uuid":"nope","event":"x\\u0000","distinct_id":"m-user"}\n{"uuid":"also-nope","event":"\\ud800"}\n';
    await js.publish(`events.${p}.${shardOf('m-user', 16)}`, `${bad}${JSON.stringify(good)}\n`, {
      headers: h,
      msgID: `malformed-${p}`,
    });
    const out = await run([capture(p, 'after', 'm-user')]);
    void out;
    const lines = await readProcessed(nc);
    expect(lines.some((l) => l.uuid === good.uuid)).toBe(true);
    const types = (await warningsOf(p)).map((w) => w.type);
    expect(types).toEqual(['invalid_event', 'invalid_event', 'invalid_event']);
  });

  it('overflow - events diverted to OVERFLOW are processed like realtime ones, in order per distinct id', async () => {
    const p = nextProject++;
    const events = Array.from({ length: 30 }, (_, i) => capture(p, 'hot', 'hot-user', { i, $set: { last: i } }));
    await publishEvents(js, events, { perMessage: 7, kind: 'overflow' });
    await waitForCommitted(db, events);
    const lines = (await readProcessed(nc)).filter((l) => l.project_id === p);
    expect(lines.map((l) => l.properties.i)).toEqual(events.map((_, i) => i));
    expect(lines.every((l) => l.person_id === personUuidFor(p, 'hot-user') && l.msgId.startsWith('OVERFLOW:'))).toBe(true);
    expect((await personOf(p, 'hot-user'))?.properties).toEqual({ last: 29 });
  });

  it('person cache - a person changed or merged away by another writer is read again, never served stale', async () => {
    const p = nextProject++;
    await run([capture(p, 'seen', 'cache-a'), capture(p, 'seen', 'cache-b')]);
    const a = (await personOf(p, 'cache-a'))!;
    const b = (await personOf(p, 'cache-b'))!;
    // What another worker could do meanwhile: change a's person, merge b's person into it.
    await db.query(`UPDATE persons SET properties = '{"plan":"team"}', version = version + 1 WHERE uuid = $1`, [a.uuid]);
    await db.query('UPDATE person_distinct_ids SET person_uuid = $1 WHERE person_uuid = $2', [a.uuid, b.uuid]);
    await db.query('DELETE FROM persons WHERE uuid = $1', [b.uuid]);
    const identify = capture(p, '$identify', 'cache-a', { $set_once: { plan: 'free', first: 1 } });
    const after = capture(p, 'after', 'cache-b');
    const out = await run([identify, after]);
    expect((await personOf(p, 'cache-a'))?.properties).toEqual({ plan: 'team', first: 1 });
    expect([out.get(identify.uuid)?.person_id, out.get(after.uuid)?.person_id]).toEqual([a.uuid, a.uuid]);
  });

  it('text PostgreSQL cannot store (NUL, lone surrogates) is kept as U+FFFD and never blocks the shard', async () => {
    const p = nextProject++;
    const id = 'nul\u0000user';
    const out = await run([
      capture(p, '$identify', id, { $set: { name: 'a\u0000b', broken: 'x\ud800y' }, $anon_distinct_id: 'anon\u0000' }),
      capture(p, '$groupidentify', id, { $group_type: 'company', $group_key: 'co\u0000', $group_set: { name: 'c\u0000' } }),
      capture(p, 'after', id),
    ]);
    expect(out.size).toBe(3);
    const person = await personOf(p, 'nul\ufffduser');
    expect(person?.properties).toEqual({ name: 'a\ufffdb', broken: 'x\ufffdy' });
    expect((await personOf(p, 'anon\ufffd'))?.uuid).toBe(person?.uuid);
    expect([...out.values()].every((l) => l.person_id === person?.uuid && l.distinct_id === 'nul\ufffduser')).toBe(true);
    const { rows } = await db.query('SELECT group_key, group_properties FROM groups WHERE project_id = $1', [p]);
    expect(rows).toEqual([{ group_key: 'co\ufffd', group_properties: { name: 'c\ufffd' } }]);
  });

  // Last: it replaces the suite's worker.
  it('dedup - the store survives a worker restart: an event sent again after it is still skipped', async () => {
    const p = nextProject++;
    const e = capture(p, 'clicked', 'restart-user');
    expect((await run([e])).size).toBe(1);
    await worker.stop();
    worker = await startWorker(workerConfig(nats.url, (db.options as { connectionString: string }).connectionString), testDeps());
    expect((await run([{ ...e }])).size).toBe(0);
    expect((await readProcessed(nc)).filter((l) => l.uuid === e.uuid)).toHaveLength(1);
  });
});
