// The plugin runtime as a user sees it: plugins saved and configured through the admin API, events
// published as ingest does, PROCESSED and the config's logs read back (test/plugins/harness.ts).
import { describe, expect, it } from 'vitest';
import { startPluginRig } from '../../test/plugins/harness.js';
import { waitFor } from '../../test/kit/index.js';
import { capture, publishEvents } from '../../test/workers/harness.js';

describe('plugin runtime', () => {
  it('transformations - change and drop events in order; PROCESSED holds what they left, with $plugins_succeeded', async () => {
    await using rig = await startPluginRig();
    const tagger = await rig.install(
      `export function processEvent(event) {
        if (event.event === 'drop me') return null
        event.properties.tagged = 'by ' + event.team_id
        return event
      }`,
      { name: 'Tagger', order: 1 },
    );
    const renamer = await rig.install(
      `export function processEvent(event) {
        if (event.properties.tagged) event.event = event.event + ' (seen)'
        return event
      }`,
      { name: 'Renamer', order: 2 },
    );
    const p = rig.user.projectId;
    const events = [capture(p, 'first', 'u1', { a: 1 }), capture(p, 'drop me', 'u1'), capture(p, 'second', 'u2', { $set: { plan: 'pro' } })];
    await publishEvents(rig.js, events, { perMessage: 3 });
    const lines = await rig.processed(2);
    await new Promise((r) => setTimeout(r, 500));
    // The dropped event is on PROCESSED neither now nor later (shards may publish in any order).
    expect((await rig.processed(2)).map((l) => l.uuid).sort()).toEqual([events[0]!.uuid, events[2]!.uuid].sort());
    const byUuid = new Map(lines.map((l) => [l.uuid, l]));
    const labels = [`Tagger (${tagger.configId})`, `Renamer (${renamer.configId})`];
    expect(byUuid.get(events[0]!.uuid)).toMatchObject({ event: 'first (seen)', properties: { a: 1, tagged: `by ${p}`, $plugins_succeeded: labels } });
    expect(byUuid.get(events[0]!.uuid)!.properties.$plugins_failed).toBeUndefined();
    // The person follows the transformed event.
    expect(byUuid.get(events[2]!.uuid)).toMatchObject({ event: 'second (seen)', person_id: expect.any(String), properties: { $set: { plan: 'pro' }, tagged: `by ${p}` } });
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/spate_worker_plugin_events_total\{method="processEvent",outcome="dropped"[^}]*\} 1\n/);
    expect(metrics).toMatch(/spate_worker_events_processed_total\{kind="dropped"[^}]*\} 1\n/);
  });

  it('transformations - a throwing and a looping plugin crash nothing and stall nothing: events go on unchanged, ERRORs name plugin and event', async () => {
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '0/100', PLUGIN_BREAKER_TIMEOUTS: '0' });
    const thrower = await rig.install("export function processEvent(event) { if (event.event === 'bad') throw new Error('nope: ' + event.distinct_id); event.properties.ok = 1; return event }", { name: 'Thrower', order: 1 });
    const looper = await rig.install("export function processEvent(event) { if (event.event === 'loop') { while (true) {} } return event }", { name: 'Looper', order: 2 });
    const p = rig.user.projectId;
    const events = [capture(p, 'bad', 'u1', { x: 1 }), capture(p, 'loop', 'u2'), capture(p, 'fine', 'u3')];
    const started = Date.now();
    await publishEvents(rig.js, events, { perMessage: 3 });
    const lines = await rig.processed(3);
    expect(Date.now() - started).toBeLessThan(15_000);
    const byUuid = new Map(lines.map((l) => [l.uuid, l]));
    expect(byUuid.get(events[0]!.uuid)!.properties).toEqual({ x: 1, $plugins_succeeded: [`Looper (${looper.configId})`], $plugins_failed: [`Thrower (${thrower.configId})`] });
    expect(byUuid.get(events[1]!.uuid)!.properties).toEqual({ ok: 1, $plugins_succeeded: [`Thrower (${thrower.configId})`], $plugins_failed: [`Looper (${looper.configId})`] });
    expect(byUuid.get(events[2]!.uuid)!.properties).toMatchObject({ ok: 1, $plugins_succeeded: [`Thrower (${thrower.configId})`, `Looper (${looper.configId})`] });
    await rig.waitForLog(thrower.configId, 'the ERROR of the throw', (l) => l.type === 'ERROR' && l.source === 'PLUGIN');
    const errors = (await rig.logs(thrower.configId)).filter((l) => l.type === 'ERROR');
    expect(errors.map((l) => l.message)).toEqual([`processEvent threw Error: nope: u1 on event ${events[0]!.uuid} ("bad"): the event goes on as it was before this plugin`]);
    await rig.waitForLog(looper.configId, 'the ERROR of the loop', (l) => l.type === 'ERROR' && l.message.includes(events[1]!.uuid) && l.message.includes('ran for more than 100 ms of CPU time'));
    // The worker is still up and processing.
    expect(rig.worker.ready()).toBe(true);
    await publishEvents(rig.js, [capture(p, 'later', 'u4')]);
    await rig.processed(4);
    // The live page counts plugin errors from the stored logs.
    const figures = (await rig.f.api('GET', '/live/figures')).body as { activity?: { pluginErrorsLastHour: number } };
    expect(figures.activity?.pluginErrorsLastHour).toBeGreaterThanOrEqual(2);
  });

  it('transformations - a uuid set to a non-UUID or a changed team_id fails that plugin only: events reach PROCESSED as they were, with ERRORs, at once', async () => {
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '0/100' });
    const bad = await rig.install(
      `export function processEvent(event) {
        event.properties.seen = 1
        if (event.event === 'patch') event.uuid = 'x'
        if (event.event === 'whole') return { ...event, uuid: 'not-a-uuid-' + event.distinct_id }
        if (event.event === 'team') event.team_id = 999
        return event
      }`,
      { name: 'Bad', order: 1 },
    );
    const good = await rig.install("export function processEvent(event) { event.properties.good = 1; return event }", { name: 'Good', order: 2 });
    const p = rig.user.projectId;
    const kinds = ['patch', 'whole', 'team'];
    const events = Array.from({ length: 30 }, (_, i) => capture(p, kinds[i % 3]!, `u${i}`, { n: i }));
    const started = Date.now();
    await publishEvents(rig.js, events, { perMessage: 10 });
    const lines = await rig.processed(30);
    // Not one bisection per event (each a trial of the batch): the shard went on at once.
    expect(Date.now() - started).toBeLessThan(15_000);
    const byUuid = new Map(lines.map((l) => [l.uuid, l]));
    for (const [i, e] of events.entries()) {
      expect(byUuid.get(e.uuid)).toMatchObject({ event: e.event, distinct_id: `u${i}`, person_id: expect.any(String) });
      expect(byUuid.get(e.uuid)!.properties).toEqual({ n: i, good: 1, $plugins_succeeded: [`Good (${good.configId})`], $plugins_failed: [`Bad (${bad.configId})`] });
    }
    await rig.waitForLog(bad.configId, 'the ERRORs', (l) => l.type === 'ERROR' && l.message.includes(events[2]!.uuid));
    const errors = (await rig.logs(bad.configId)).filter((l) => l.type === 'ERROR' && l.source === 'PLUGIN').map((l) => l.message);
    const goesOn = 'the event goes on as it was before this plugin';
    expect(errors).toContain(`processEvent set uuid to "x", which is not a UUID on event ${events[0]!.uuid} ("patch"): ${goesOn}`);
    expect(errors).toContain(`processEvent set uuid to "not-a-uuid-u1", which is not a UUID on event ${events[1]!.uuid} ("whole"): ${goesOn}`);
    expect(errors).toContain(`processEvent changed team_id: the team of an event cannot be changed on event ${events[2]!.uuid} ("team"): ${goesOn}`);
  });

  it('transformations - an event the plugins make too large for PROCESSED (bytes, not characters) goes on as captured, with ERRORs; nothing fails', async () => {
    // A stock nats-server's max_payload, 1 MiB: 400,000 characters pass the character bound (the
    // max payload) but are 1.2 MB of UTF-8; two plugins adding 600 KB each fit each on their own.
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '0/100' }, {}, { natsMaxPayload: 1024 * 1024 });
    const bloater = await rig.install(
      `export function processEvent(event) {
        if (event.event === 'add') event.properties.blob = '€'.repeat(400000)
        if (event.event === 'rename') { event.event = 'renamed'; event.properties.blob = '€'.repeat(400000) }
        if (event.event === 'half') event.properties.half1 = '€'.repeat(200000)
        event.properties.small = 1
        return event
      }`,
      { name: 'Bloater', order: 1 },
    );
    const halver = await rig.install(
      `export function processEvent(event) {
        if (event.event === 'half') event.properties.half2 = '€'.repeat(200000)
        event.properties.good = 1
        return event
      }`,
      { name: 'Halver', order: 2 },
    );
    const p = rig.user.projectId;
    const events = ['add', 'rename', 'half', 'fine'].map((name, n) => capture(p, name, `u${n}`, { n }));
    const started = Date.now();
    await publishEvents(rig.js, events, { perMessage: 4 });
    const lines = await rig.processed(4);
    // No poison search (a trial of the batch per step): the shard went on at once.
    expect(Date.now() - started).toBeLessThan(15_000);
    const byUuid = new Map(lines.map((l) => [l.uuid, l]));
    const [B, H] = [`Bloater (${bloater.configId})`, `Halver (${halver.configId})`];
    // As captured: the plugin that added a property beside the megabyte is not blamed for its size,
    // but the event does not carry its change either (a WARN says why; counted as skipped).
    expect(byUuid.get(events[0]!.uuid)).toMatchObject({ event: 'add', properties: { n: 0, $plugins_succeeded: [], $plugins_failed: [B, H] } });
    expect(byUuid.get(events[1]!.uuid)).toMatchObject({ event: 'rename', properties: { n: 1, $plugins_succeeded: [], $plugins_failed: [B, H] } });
    expect(byUuid.get(events[2]!.uuid)).toMatchObject({ event: 'half', properties: { n: 2, $plugins_succeeded: [], $plugins_failed: [B, H] } });
    for (const e of events.slice(0, 3)) expect(Object.keys(byUuid.get(e.uuid)!.properties).sort()).toEqual(['$plugins_failed', '$plugins_succeeded', 'n']);
    expect(byUuid.get(events[3]!.uuid)!.properties).toEqual({ n: 3, small: 1, good: 1, $plugins_succeeded: [B, H] });
    const tooLarge = (l: { message: string }, e: (typeof events)[number]) =>
      new RegExp(`^processEvent made event ${e.uuid} \\("${e.event}"\\) (\\d+) bytes long as JSON \\(its change added \\d+\\), more than the (\\d+) an event may take in a PROCESSED message: the event goes on as it was before the transformations$`).exec(l.message);
    await rig.waitForLog(bloater.configId, 'the ERROR of the half', (l) => tooLarge(l, events[2]!) !== null);
    await rig.waitForLog(halver.configId, 'the ERROR of the half', (l) => tooLarge(l, events[2]!) !== null);
    const bloaterErrors = (await rig.logs(bloater.configId)).filter((l) => l.type === 'ERROR' && l.source === 'PLUGIN');
    expect(bloaterErrors).toHaveLength(3);
    const [, bytes, room] = tooLarge(bloaterErrors.find((l) => l.message.includes(events[0]!.uuid))!, events[0]!)!.map(Number);
    expect(bytes).toBeGreaterThan(1_200_000);
    expect(room).toBeLessThan(1024 * 1024);
    expect((await rig.logs(halver.configId)).filter((l) => l.type === 'ERROR')).toHaveLength(1);
    await rig.waitForLog(halver.configId, 'the WARN of the add', (l) => l.type === 'WARN' && l.message.startsWith(`processEvent's change to event ${events[0]!.uuid} ("add") is discarded: ${B} made`));
    // Counted as the plugins' failures; no event failed its batch.
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    expect(Number(/spate_worker_plugin_events_total\{method="processEvent",outcome="failed"[^}]*\} (\d+)\n/.exec(metrics)?.[1])).toBeGreaterThanOrEqual(4);
    const { rows } = await rig.f.db.query("SELECT details FROM ingestion_warnings WHERE project_id = $1 AND type = 'event_processing_failed'", [p]);
    expect(rows).toEqual([]);
  });

  it('transformations - large captured events still take plugins\' changes; blame for a too large event goes by the bytes each change added', async () => {
    // 1 MiB: ingest takes lines up to 1,035,429 bytes (ingest/message-size.ts), so a 1,000,000-byte event is an ordinary one.
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '0/100' }, {}, { natsMaxPayload: 1024 * 1024 });
    const whole = await rig.install(
      `export function processEvent(event) {
        if (event.event === 'mixed' || event.event === 'whole') return { ...event, properties: { ...event.properties, t: 1 } }
        event.properties.x = 1
        return event
      }`,
      { name: 'Whole', order: 1 },
    );
    const euros = await rig.install(
      `export function processEvent(event) {
        if (event.event === 'mixed') event.properties.euros = '€'.repeat(30000)
        return event
      }`,
      { name: 'Euros', order: 2 },
    );
    const p = rig.user.projectId;
    const big = capture(p, 'big', 'u1', { pad: '' });
    big.properties.pad = 'x'.repeat(1_000_000 - Buffer.byteLength(JSON.stringify(big)));
    expect(Buffer.byteLength(JSON.stringify(big))).toBe(1_000_000);
    // 960 KB of UTF-8 in 320,000 characters: Whole's new object is 320,000 characters long, Euros'
    // change 30,000 (under a tenth of both), but it adds 90,000 bytes, Whole's 6.
    const mixed = capture(p, 'mixed', 'u2', { e: '€'.repeat(320_000) });
    // A new object as large as the event: not a change of 700,000 characters (the bound is max_payload).
    const wholeEvent = capture(p, 'whole', 'u3', { pad: 'y'.repeat(700_000) });
    await publishEvents(rig.js, [big, mixed, wholeEvent], { perMessage: 1 });
    const byUuid = new Map((await rig.processed(3)).map((l) => [l.uuid, l]));
    const [W, E] = [`Whole (${whole.configId})`, `Euros (${euros.configId})`];
    expect(byUuid.get(big.uuid)!.properties).toEqual({ pad: big.properties.pad, x: 1, $plugins_succeeded: [W, E] });
    expect(byUuid.get(wholeEvent.uuid)!.properties).toEqual({ pad: wholeEvent.properties.pad, t: 1, $plugins_succeeded: [W, E] });
    expect(byUuid.get(mixed.uuid)!.properties).toEqual({ e: mixed.properties.e, $plugins_succeeded: [], $plugins_failed: [W, E] });
    await rig.waitForLog(euros.configId, 'the ERROR of the mixed event', (l) => l.type === 'ERROR' && l.message.includes(mixed.uuid));
    const error = (await rig.logs(euros.configId)).find((l) => l.type === 'ERROR')!;
    expect(error.message).toMatch(new RegExp(`^processEvent made event ${mixed.uuid} \\("mixed"\\) \\d+ bytes long as JSON \\(its change added 90\\d{3}\\), more than the 1048\\d{3} an event`));
    await rig.waitForLog(whole.configId, 'the WARN of the mixed event', (l) => l.type === 'WARN' && l.message.startsWith(`processEvent's change to event ${mixed.uuid} ("mixed") is discarded: ${E} made`));
    expect((await rig.logs(whole.configId)).filter((l) => l.type === 'ERROR')).toEqual([]);
    // Only Euros failed (metrics, breaker); Whole's discarded change is counted as skipped.
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/spate_worker_plugin_events_total\{method="processEvent",outcome="failed"[^}]*\} 1\n/);
    expect(metrics).toMatch(/spate_worker_plugin_events_total\{method="processEvent",outcome="skipped"[^}]*\} 1\n/);
  });

  it('transformations - a plugin that makes the runtime fail (a forged result) is logged, counted and disabled by its breaker; events go on', async () => {
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '3/10' });
    // The prelude joins a batch's results with Array.prototype.join, which the plugin shares and
    // replaces here: the result string the host reads is malformed (ResultFormatError).
    const forger = await rig.install(
      `const join = Array.prototype.join
      Array.prototype.join = function (sep) {
        const text = join.call(this, sep)
        return sep === '' && text.startsWith('@') ? text + '@x' : text
      }
      export function processEvent(event) { event.properties.forged = 1; return event }`,
      { name: 'Forger' },
    );
    const p = rig.user.projectId;
    // One person: one shard, one batch.
    const events = Array.from({ length: 4 }, (_, n) => capture(p, 'e', 'u1', { n }));
    await publishEvents(rig.js, events, { perMessage: 4 });
    const lines = await rig.processed(4);
    const label = `Forger (${forger.configId})`;
    for (const l of lines) expect(l.properties).toEqual({ n: expect.any(Number), $plugins_succeeded: [], $plugins_failed: [label] });
    const runtime = /^processEvent failed in the plugin runtime \(ResultFormatError: malformed sandbox result at \d+: [^)]*\) on event ([0-9a-f-]{36}) \("e"\) and 3 more: the events go on as they were before this plugin$/;
    await rig.waitForLog(forger.configId, 'the ERROR of the runtime failure', (l) => l.source === 'PLUGIN' && l.type === 'ERROR' && runtime.test(l.message));
    const logged = (await rig.logs(forger.configId)).find((l) => runtime.test(l.message))!;
    expect(events.map((e) => e.uuid)).toContain(runtime.exec(logged.message)![1]);
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    expect(Number(/spate_worker_plugin_events_total\{method="processEvent",outcome="failed"[^}]*\} (\d+)\n/.exec(metrics)?.[1])).toBeGreaterThanOrEqual(4);
    await rig.waitForLog(forger.configId, 'the breaker', (l) => l.source === 'SYSTEM' && /^Disabled by the circuit breaker: \d+ of its last 10 events failed \(PLUGIN_BREAKER 3\/10\)/.test(l.message));
    await waitFor('the config disabled', async () => (await rig.config(forger.configId)).enabled === false, 20_000, 200);
  });

  it('plugins - a plugin that allocates without bound is stopped by the memory limit; the event goes on', async () => {
    await using rig = await startPluginRig({ PLUGIN_MEMORY_LIMIT: '8MiB', PLUGIN_CPU_TIMEOUT: '10s' });
    const hog = await rig.install('const kept: object[] = []\nexport function processEvent(event) { for (;;) kept.push({ n: kept.length, list: [kept.length, "item " + kept.length] }) }', { name: 'Hog' });
    const p = rig.user.projectId;
    const event = capture(p, 'e', 'u1', { y: 2 });
    await publishEvents(rig.js, [event]);
    const [line] = await rig.processed(1);
    expect(line!.properties).toEqual({ y: 2, $plugins_succeeded: [], $plugins_failed: [`Hog (${hog.configId})`] });
    await rig.waitForLog(hog.configId, 'out of memory', (l) => l.type === 'ERROR' && l.message.includes('out of memory'));
  });

  it('plugins - setupPlugin is retried, then the config is disabled with SYSTEM logs saying why', async () => {
    await using rig = await startPluginRig({ PLUGIN_SETUP_ATTEMPTS: '3' });
    const broken = await rig.install("export async function setupPlugin({ config }) { throw new Error('cannot reach ' + config.host + ' with ' + config.apiKey) }\nexport const processEvent = (e) => e", {
      name: 'Broken',
      config: { host: 'db.example', apiKey: 'sk-very-secret' },
      configSchema: [{ key: 'host', type: 'string' }, { key: 'apiKey', type: 'string', secret: true }],
    });
    await publishEvents(rig.js, [capture(rig.user.projectId, 'e', 'u1')]);
    await rig.waitForLog(broken.configId, 'the last attempt', (l) => l.source === 'SYSTEM' && l.message.includes('Disabling the plugin after 3 attempts'));
    const system = (await rig.logs(broken.configId)).filter((l) => l.source === 'SYSTEM').map((l) => [l.type, l.message.replace(/instance ID [0-9a-f-]+/, 'instance ID …')]);
    expect(system.filter(([type]) => type === 'INFO')).toEqual(Array.from({ length: 3 }, () => ['INFO', 'Plugin loaded (instance ID …).']));
    expect(system.filter(([type]) => type === 'ERROR')).toEqual([
      ['ERROR', 'setupPlugin failed (instance ID …): Error: cannot reach db.example with ***. Retrying in 0.2 s.'],
      ['ERROR', 'setupPlugin failed (instance ID …): Error: cannot reach db.example with ***. Retrying in 0.4 s.'],
      ['ERROR', 'setupPlugin failed (instance ID …): Error: cannot reach db.example with ***. Disabling the plugin after 3 attempts.'],
    ]);
    await waitFor('the config disabled', async () => (await rig.config(broken.configId)).enabled === false, 20_000, 200);
    // The secret never reached the logs.
    expect(JSON.stringify(await rig.logs(broken.configId))).not.toContain('sk-very-secret');
  });

  it('plugins - meta.config (secrets decrypted), meta.global, meta.storage, meta.cache and console reach the plugin', async () => {
    await using rig = await startPluginRig();
    const plugin = await rig.install(
      `export async function setupPlugin({ config, global, storage }) {
        global.greeting = 'hello ' + config.name
        const runs = ((await storage.get('runs', 0)) as number) + 1
        await storage.set('runs', runs)
        global.runs = runs
        console.log('set up', { runs, key: config.key })
      }
      export async function processEvent(event, { global, cache }) {
        event.properties.greeting = global.greeting
        event.properties.runs = global.runs
        event.properties.count = await cache.incr('events')
        await cache.set('last', event.distinct_id, 60)
        event.properties.last = await cache.get('last')
        return event
      }`,
      { name: 'Meta', config: { name: 'world', key: 'k-secret-1234' }, configSchema: [{ key: 'name', type: 'string' }, { key: 'key', type: 'string', secret: true }] },
    );
    const p = rig.user.projectId;
    await publishEvents(rig.js, [capture(p, 'a', 'u1')]);
    const [first] = await rig.processed(1);
    expect(first!.properties).toMatchObject({ greeting: 'hello world', runs: 1, count: 1, last: 'u1' });
    await rig.waitForLog(plugin.configId, 'the console line', (l) => l.source === 'CONSOLE');
    const consoleLines = (await rig.logs(plugin.configId)).filter((l) => l.source === 'CONSOLE');
    expect(consoleLines).toEqual([expect.objectContaining({ type: 'LOG', message: 'set up {"runs":1,"key":"***"}' })]);
    // A second worker sets the plugin up again: storage persisted, the cache is shared.
    await rig.worker.stop();
    await rig.startWorker();
    await publishEvents(rig.js, [capture(p, 'b', 'u2')]);
    const lines = await rig.processed(2);
    expect(lines[1]!.properties).toMatchObject({ greeting: 'hello world', runs: 2, count: 2, last: 'u2' });
  });

  it('plugins - the circuit breaker disables a plugin that keeps failing; events flow meanwhile', async () => {
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '5/10' });
    const flaky = await rig.install("export function processEvent(event) { throw new Error('always') }", { name: 'Flaky' });
    const p = rig.user.projectId;
    await publishEvents(rig.js, Array.from({ length: 12 }, (_, i) => capture(p, 'e', `u${i}`)), { perMessage: 12 });
    const lines = await rig.processed(12);
    // Failed while it ran; after the breaker opened (or the config was disabled) not run at all.
    const label = `Flaky (${flaky.configId})`;
    expect(lines.filter((l) => (l.properties.$plugins_succeeded as string[] | undefined)?.includes(label))).toEqual([]);
    expect(lines.filter((l) => (l.properties.$plugins_failed as string[] | undefined)?.includes(label)).length).toBeGreaterThanOrEqual(5);
    // At least 5 of the last 10: all 12 events may come in one batch, then all 10 failed.
    await rig.waitForLog(flaky.configId, 'the breaker', (l) => {
      const opened = /^Disabled by the circuit breaker: (\d+) of its last 10 events failed \(PLUGIN_BREAKER 5\/10\)/.exec(l.message);
      return l.source === 'SYSTEM' && opened !== null && Number(opened[1]) >= 5;
    });
    await waitFor('the config disabled', async () => (await rig.config(flaky.configId)).enabled === false, 20_000, 200);
    // Disabled: later events are not run through it at all.
    await publishEvents(rig.js, [capture(p, 'after', 'u99')]);
    const after = (await rig.processed(13)).find((l) => l.event === 'after')!;
    expect(after.properties.$plugins_failed).toBeUndefined();
    expect(after.properties.$plugins_succeeded).toBeUndefined();
  });

  it('plugins - saving new code reaches the running worker: the old instance is torn down, the new one set up', async () => {
    await using rig = await startPluginRig();
    const v = await rig.install("export function processEvent(event) { event.properties.version = 1; return event }\nexport function teardownPlugin() { console.log('teardown v1') }", { name: 'Versioned' });
    const p = rig.user.projectId;
    await publishEvents(rig.js, [capture(p, 'a', 'u1')]);
    expect((await rig.processed(1))[0]!.properties.version).toBe(1);
    const saved = await rig.f.api('PATCH', `/api/organizations/${rig.user.organizationId}/pipeline_transformations/${v.pluginId}/update_source/`, {
      key: rig.user.key,
      body: { 'index.ts': 'export function processEvent(event) { event.properties.version = 2; return event }' },
    });
    expect(saved.status).toBe(200);
    await rig.waitForLog(v.configId, 'the teardown', (l) => l.message === 'teardown v1');
    await publishEvents(rig.js, [capture(p, 'b', 'u1')]);
    expect((await rig.processed(2))[1]!.properties.version).toBe(2);
  });
});
