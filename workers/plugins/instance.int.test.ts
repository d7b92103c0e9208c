// One plugin instance (workers/plugins/instance.ts) with its real sandbox, its logs on a real
// nats-server and its fetch to a real local HTTP server: its lifecycle, and the transformation hook
// running on it (workers/plugins/transformations.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, ensurePipelineStreams, type CapturedEvent, type NatsConnection } from '../../lib/index.js';
import { EventHooks, HookedEventTooLargeError } from '../coordination/index.js';
import type { PluginCatalog } from './catalog.js';
import { transformationHook } from './transformations.js';
import { startHttpSink, startNats, TEST_PIPELINE_LIMITS, waitFor, type NatsHandle } from '../../test/kit/index.js';
import { startTestInstance, storedLogLines } from '../../test/plugins/instance.js';
import type { Sandbox } from './sandbox/index.js';

let nats: NatsHandle;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await nats.connect('plugin-instance-test');
  await ensurePipelineStreams(await jetstreamManager(nc), TEST_PIPELINE_LIMITS);
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

const event = (name: string) => ({ uuid: '00000000-0000-4000-8000-000000000001', event: name, distinct_id: 'u1', properties: {}, timestamp: '2026-01-01T00:00:00Z' });

describe('plugin instance', () => {
  it('instance - an engine replaced while a batch is in flight, then stopped: the old engine is freed too', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    await using sink = await startHttpSink(async () => (await gate, 200));
    const { instance, stop } = await startTestInstance(
      nc,
      `const kept: object[] = []
      export async function processEvent(event, { config }) {
        if (event.event === 'slow') await fetch(config.url)
        if (event.event === 'hog') for (;;) kept.push({ n: kept.length, list: [kept.length, 'item ' + kept.length] })
        return event
      }`,
      { url: `${sink.url}/slow` },
    );
    try {
      expect(await instance.ready()).toBe(true);
      const old = (instance as unknown as { sandbox: Sandbox }).sandbox;
      // A batch waits on its fetch; another runs out of memory: the engine is replaced once the first is done.
      const slow = instance.runBatch('processEvent', 'event', { teamId: 1, events: [event('slow')] }).catch(() => undefined);
      await waitFor('the fetch to arrive', () => sink.requests.length === 1);
      await instance.runBatch('processEvent', 'event', { teamId: 1, events: [event('hog')] });
      expect(instance.state).toBe('starting');
      expect(await instance.ready()).toBe(true);
      // Stopped (config changed or the worker stops) while the first batch is still in flight.
      const stopped = instance.stop();
      await sleep(300);
      expect(old.disposed).toBe(false);
      open();
      await slow;
      await stopped;
      expect(old.disposed).toBe(true);
    } finally {
      open();
      await stop();
    }
  });
});

describe('transformations on an instance', () => {
  const captured = (uuid: string, distinctId: string): CapturedEvent =>
    ({ uuid, event: 'clicked', distinct_id: distinctId, properties: { a: 1 }, timestamp: '2026-01-01T00:00:00Z', token: 'phc_test', project_id: 1, now: '2026-01-01T00:00:00Z' });

  /** The transformation hook on the one instance, as the plugins role adds it. */
  function hooksOn({ instance, entry, metrics }: Pick<Awaited<ReturnType<typeof startTestInstance>>, 'instance' | 'entry' | 'metrics'>): EventHooks {
    const catalog = { noTransformations: false, transformations: () => [entry], acquire: () => instance } as unknown as PluginCatalog;
    const hooks = new EventHooks();
    hooks.add('plugins', transformationHook(catalog, metrics, { maxChangeChars: () => 1_000_000 }, createLogger('test', 'silent')));
    return hooks;
  }

  it('transformations - an event changed into one the batch refuses goes on as captured, the plugin failed, with an ERROR', async () => {
    const { instance, entry, metrics, stop } = await startTestInstance(nc, "export function processEvent(event) { event.event = 'renamed'; if (event.distinct_id === 'refused') event.properties.refuse = 1; return event }");
    try {
      const hooks = hooksOn({ instance, entry, metrics });
      const events = [
        { projectId: 1, event: captured('00000000-0000-4000-8000-000000000001', 'refused') },
        { projectId: 1, event: captured('00000000-0000-4000-8000-000000000002', 'fine') },
      ];
      // What processing refuses (as the persons role's check would a changed event it cannot take).
      const left = await hooks.run({ stream: 'EVENTS', shard: 0 }, events, (e, event) => {
        if ((event.properties as Record<string, unknown>).refuse) throw new TypeError('hook plugins replaced the event with one that is not a captured event');
        e.event = event;
      });
      const label = `Test (${entry.id})`;
      expect(left.map((e) => e.event)).toEqual([
        { ...captured('00000000-0000-4000-8000-000000000001', 'refused'), properties: { a: 1, $plugins_succeeded: [], $plugins_failed: [label] } },
        { ...captured('00000000-0000-4000-8000-000000000002', 'fine'), event: 'renamed', properties: { a: 1, $plugins_succeeded: [label] } },
      ]);
    } finally {
      await stop();
    }
    const errors = (await storedLogLines(nc, entry.id)).filter((l) => l.type === 'ERROR');
    expect(errors.map((l) => [l.source, l.message])).toEqual([
      [
        'PLUGIN',
        'processEvent changed event 00000000-0000-4000-8000-000000000001 ("clicked") into one that cannot be processed (TypeError: hook plugins replaced the event with one that is not a captured event): the event goes on as it was before the transformations',
      ],
    ]);
  });

  it('transformations - an event without room for $plugins_succeeded goes on without the lists, with its changes when they fit; counted, not silent', async () => {
    const { instance, entry, metrics, stop } = await startTestInstance(nc, 'export function processEvent(event) { event.properties.x = 1; return event }');
    try {
      const hooks = hooksOn({ instance, entry, metrics });
      const events = [
        { projectId: 1, event: captured('00000000-0000-4000-8000-000000000001', 'room for x') },
        { projectId: 1, event: captured('00000000-0000-4000-8000-000000000002', 'no room') },
        { projectId: 1, event: captured('00000000-0000-4000-8000-000000000003', 'fine') },
      ];
      // As the batch would for events near the room: the lists never fit, for "no room" nor x.
      const added = (e: (typeof events)[number], properties: Readonly<Record<string, unknown>>) => {
        const room = e.event.distinct_id !== 'fine' && '$plugins_succeeded' in properties;
        if (room || (e.event.distinct_id === 'no room' && 'x' in properties)) throw new HookedEventTooLargeError(e.event.uuid, 2000, 1000);
        e.event = { ...e.event, properties: { ...e.event.properties, ...properties } };
      };
      const left = await hooks.run({ stream: 'EVENTS', shard: 0 }, events, () => { throw new Error('not replaced here'); }, added);
      const label = `Test (${entry.id})`;
      expect(left.map((e) => e.event.properties)).toEqual([{ a: 1, x: 1 }, { a: 1 }, { a: 1, x: 1, $plugins_succeeded: [label] }]);
      expect((await metrics.listsOmitted.get()).values[0]!.value).toBe(2);
      // The change that did not fit is the plugin's failure; the lists that did not are not.
      const counted = (await metrics.events.get()).values.filter((v) => v.labels.method === 'processEvent').map((v) => [v.labels.outcome, v.value]);
      expect(Object.fromEntries(counted)).toMatchObject({ changed: 2, failed: 1 });
    } finally {
      await stop();
    }
    // The config's logs hold the test's before this one too (the same config id).
    const errors = (await storedLogLines(nc, entry.id)).filter((l) => l.type === 'ERROR' && l.message.includes('bytes long as JSON'));
    expect(errors.map((l) => l.message)).toEqual([
      'processEvent made event 00000000-0000-4000-8000-000000000002 ("clicked") 2000 bytes long as JSON (its change added 6), more than the 1000 an event may take in a PROCESSED message: the event goes on as it was before the transformations',
    ]);
  });
});
