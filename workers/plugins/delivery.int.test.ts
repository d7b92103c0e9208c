// Destinations, scheduled tasks and jobs as a user sees them (docs/plugins.md): plugins saved and
// configured through the admin API, events published as ingest does, what the destination's HTTP
// server receives and the config's logs read back (test/plugins/harness.ts, test/kit/http-sink.ts).
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import type { TaskClock } from '../index.js';
import { FAST_PLUGINS, startPluginRig } from '../../test/plugins/harness.js';
import { startHttpSink, waitFor } from '../../test/kit/index.js';
import { capture, publishEvents, workerEnv, workerProcesses } from '../../test/workers/harness.js';

describe('plugin destinations', () => {
  it('composeWebhook - Spate sends the webhook as composed (url, method, headers, body); null sends nothing', async () => {
    await using rig = await startPluginRig();
    await using sink = await startHttpSink();
    const hook = await rig.install(
      `export function composeWebhook(event, { config }) {
        if (event.event === 'ignored') return null
        if (event.event === 'defaults') return { url: config.url + '/defaults', body: JSON.stringify(event) }
        return {
          url: config.url + '/hook/' + event.distinct_id + '?team=' + event.team_id,
          method: 'put',
          headers: { 'X-Event': event.event, 'Content-Type': 'text/plain' },
          body: event.uuid + ' ' + event.properties.plan,
        }
      }`,
      { collection: 'pipeline_destinations', name: 'Hook', config: { url: sink.url } },
    );
    const p = rig.user.projectId;
    const events = [capture(p, 'signed up', 'u1', { plan: 'pro' }), capture(p, 'ignored', 'u2'), capture(p, 'defaults', 'u3', { a: 1 })];
    await publishEvents(rig.js, events);
    await waitFor('two webhooks', () => sink.requests.length >= 2, 20_000, 100);
    await new Promise((r) => setTimeout(r, 500));
    expect(sink.requests).toHaveLength(2);
    const put = sink.requests.find((r) => r.method === 'PUT')!;
    expect(put.path).toBe(`/hook/u1?team=${p}`);
    expect(put.headers['x-event']).toBe('signed up');
    expect(put.headers['content-type']).toBe('text/plain');
    expect(put.body).toBe(`${events[0]!.uuid} pro`);
    // Without method and headers: POST with Content-Type: application/json (PostHog's defaults);
    // the event as the plugin sees it: its processed fields, team_id, never the project's token.
    const post = sink.requests.find((r) => r.method === 'POST')!;
    expect(post.path).toBe('/defaults');
    expect(post.headers['content-type']).toBe('application/json');
    const sent = JSON.parse(post.body) as Record<string, unknown>;
    expect(sent).toMatchObject({ uuid: events[2]!.uuid, event: 'defaults', distinct_id: 'u3', team_id: p, properties: { a: 1 }, person_id: expect.any(String) });
    expect(sent.token).toBeUndefined();
    expect(sent.project_id).toBeUndefined();
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/spate_worker_plugin_delivered_total\{method="composeWebhook"[^}]*\} 2\n/);
    expect(metrics).toMatch(/spate_worker_plugin_delivery_skipped_total(\{[^}]*\})? 1\n/);
    expect(metrics).toMatch(new RegExp(`spate_worker_plugin_delivery_lag_messages\\{plugin_config="${hook.configId}"[^}]*\\} 0\\n`));
  });

  it('composeWebhook - failures are retried with back-off, then the event is skipped with an ERROR naming it; a 4xx is not retried', async () => {
    await using rig = await startPluginRig({ PLUGIN_DELIVERY_ATTEMPTS: '3', PLUGIN_DELIVERY_BACKOFF: '200ms' });
    const p = rig.user.projectId;
    const events = [capture(p, 'down', 'u1'), capture(p, 'flaky', 'u2'), capture(p, 'refused', 'u3'), capture(p, 'fine', 'u4')];
    let flaky = 0;
    await using sink = await startHttpSink((r) => {
      if (r.path === '/down') return 503;
      if (r.path === '/flaky') return ++flaky === 1 ? 500 : 200;
      if (r.path === '/refused') return 400;
      return 200;
    });
    const hook = await rig.install("export function composeWebhook(event, { config }) { return { url: config.url + '/' + event.event, body: event.uuid } }", {
      collection: 'pipeline_destinations',
      name: 'Hook',
      config: { url: sink.url },
    });
    await publishEvents(rig.js, events, { perMessage: 4 });
    await rig.waitForLog(hook.configId, 'the ERROR of the event that stays down', (l) => l.type === 'ERROR' && l.message.includes(events[0]!.uuid));
    const paths = (path: string) => sink.requests.filter((r) => r.path === path).length;
    expect(paths('/down')).toBe(3);
    expect(paths('/flaky')).toBe(2);
    expect(paths('/refused')).toBe(1);
    expect(paths('/fine')).toBe(1);
    const errors = (await rig.logs(hook.configId)).filter((l) => l.type === 'ERROR').map((l) => l.message);
    expect(errors.sort()).toEqual(
      [
        `composeWebhook request POST ${sink.url}/down was answered 503 Service Unavailable on event ${events[0]!.uuid} ("down") after 3 attempts: the event is skipped`,
        `composeWebhook request POST ${sink.url}/refused was answered 400 Bad Request on event ${events[2]!.uuid} ("refused"): the event is skipped`,
      ].sort(),
    );
    const warns = (await rig.logs(hook.configId)).filter((l) => l.type === 'WARN').map((l) => l.message);
    expect(warns.some((w) => w.includes('trying again in 0.2 s (attempt 2 of 3)'))).toBe(true);
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/spate_worker_plugin_delivered_total\{method="composeWebhook"[^}]*\} 2\n/);
    expect(metrics).toMatch(/spate_worker_plugin_delivery_failed_total\{method="composeWebhook",reason="status"[^}]*\} 2\n/);
    // The position moved past all of them: a new holder sends none again.
    await rig.worker.stop();
    await rig.startWorker();
    await new Promise((r) => setTimeout(r, 3_000));
    expect(paths('/fine')).toBe(1);
  });

  it('onEvent - a RetryError or a throw is tried again with back-off, then the event is skipped with an ERROR; the plugin stays enabled', async () => {
    await using rig = await startPluginRig({ PLUGIN_DELIVERY_ATTEMPTS: '3', PLUGIN_DELIVERY_BACKOFF: '200ms' });
    const p = rig.user.projectId;
    const events = [capture(p, 'down', 'u1'), capture(p, 'flaky', 'u2'), capture(p, 'oops', 'u3'), capture(p, 'fine', 'u4')];
    let flaky = 0;
    await using sink = await startHttpSink((r) => {
      if (r.path === '/down') return 503;
      if (r.path === '/flaky') return ++flaky === 1 ? 500 : 200;
      return 200;
    });
    const dest = await rig.install(
      `export async function onEvent(event, { config, global }) {
        if (event.event === 'oops' && !global.oopsed) {
          global.oopsed = true
          throw new Error('not yet')
        }
        const res = await fetch(config.url + '/' + event.event, { method: 'POST', body: event.uuid })
        if (res.status !== 200) throw new RetryError('the sink answered ' + res.status)
      }`,
      { collection: 'pipeline_destinations', name: 'Sender', config: { url: sink.url } },
    );
    await publishEvents(rig.js, events, { perMessage: 4 });
    await rig.waitForLog(dest.configId, 'the ERROR of the event that stays down', (l) => l.type === 'ERROR' && l.message.includes(events[0]!.uuid));
    await waitFor('the others delivered', () => ['/flaky', '/oops', '/fine'].every((path) => sink.requests.some((r) => r.path === path)), 20_000, 50);
    const paths = (path: string) => sink.requests.filter((r) => r.path === path).length;
    expect(paths('/down')).toBe(3);
    expect(paths('/flaky')).toBe(2);
    expect(paths('/oops')).toBe(1);
    expect(paths('/fine')).toBe(1);
    const logs = await rig.logs(dest.configId);
    expect(logs.filter((l) => l.type === 'ERROR').map((l) => l.message)).toEqual([
      `onEvent threw RetryError: the sink answered 503 on event ${events[0]!.uuid} ("down") after 3 attempts: the event is skipped`,
    ]);
    expect(logs.some((l) => l.type === 'WARN' && l.message.includes('trying again in 0.2 s (attempt 2 of 3)'))).toBe(true);
    // A destination that is down is not the plugin's fault: the breaker leaves it enabled.
    expect((await rig.config(dest.configId)).enabled).toBe(true);
  });

  it('onEvent - a destination whose code keeps throwing is disabled by the breaker, with a SYSTEM log; persons go on', async () => {
    await using rig = await startPluginRig({ PLUGIN_BREAKER: '5/10', PLUGIN_DELIVERY_ATTEMPTS: '1' });
    const p = rig.user.projectId;
    const dest = await rig.install("export function onEvent(event) { null.boom }", { collection: 'pipeline_destinations', name: 'Broken' });
    await publishEvents(rig.js, Array.from({ length: 12 }, (_, i) => capture(p, 'e', `u${i}`)), { perMessage: 12 });
    await rig.processed(12);
    await rig.waitForLog(dest.configId, 'the breaker', (l) => l.source === 'SYSTEM' && /^Disabled by the circuit breaker: \d+ of its last 10 events failed \(PLUGIN_BREAKER 5\/10\)/.test(l.message));
    await waitFor('the config disabled', async () => (await rig.config(dest.configId)).enabled === false, 20_000, 200);
    const errors = (await rig.logs(dest.configId)).filter((l) => l.type === 'ERROR' && l.source === 'PLUGIN');
    expect(errors.length).toBeGreaterThanOrEqual(5);
    expect(errors[0]!.message).toMatch(/^onEvent threw TypeError: .* on event [0-9a-f-]{36} \("e"\) after 1 attempts?: the event is skipped$/);
    // Disabled, it is not run again; person processing never waited on it.
    const before = (await rig.logs(dest.configId)).length;
    await publishEvents(rig.js, [capture(p, 'after', 'u99')]);
    await rig.processed(13);
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await rig.logs(dest.configId)).length).toBe(before);
  });

  it('onEvent - every processed event reaches the destination across a worker kill -9 (at least once)', async () => {
    await using rig = await startPluginRig();
    await rig.worker.stop();
    // The destination batches through fetch: each sandbox call's events in one request.
    await using sink = await startHttpSink(() => new Promise((r) => setTimeout(() => r(200), 20)));
    const dest = await rig.install(
      `export async function onEvent(event, { config, global }) {
        if (!global.pending) {
          global.pending = []
          global.flush = Promise.resolve().then(async () => {
            const batch = global.pending
            global.pending = null
            const res = await fetch(config.url + '/batch', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(batch.map((e) => e.uuid)) })
            if (res.status !== 200) throw new RetryError('the sink answered ' + res.status)
          })
        }
        global.pending.push(event)
        await global.flush
      }`,
      { collection: 'pipeline_destinations', name: 'Batcher', config: { url: sink.url } },
    );
    const env = workerEnv(rig.f.nats.url, rig.f.databaseUrl, { ...FAST_PLUGINS, PLUGIN_DELIVERY_BATCH: '100' });
    await using procs = workerProcesses(env);
    const a = await procs.spawn('dest-a');
    const p = rig.user.projectId;
    const events = Array.from({ length: 2_000 }, (_, i) => capture(p, `e${i % 7}`, `user-${i % 97}`, { i }));
    const received = () => sink.requests.flatMap((r) => JSON.parse(r.body) as string[]);
    for (let round = 0; round < 5; round++) await publishEvents(rig.js, events.slice(round * 200, round * 200 + 200));
    await waitFor('deliveries under way', () => received().length >= 300, 60_000, 50);
    a.kill('SIGKILL');
    await a.exited;
    for (let round = 5; round < 10; round++) await publishEvents(rig.js, events.slice(round * 200, round * 200 + 200));
    await procs.spawn('dest-b');
    await waitFor('every event delivered', () => new Set(received()).size >= events.length, 90_000, 200);
    const all = received();
    const unique = new Set(all);
    for (const e of events) expect(unique.has(e.uuid), e.uuid).toBe(true);
    const duplicates = all.length - unique.size;
    console.log(`kill -9 of the destination's holder: ${events.length} events, ${all.length} deliveries, ${duplicates} duplicates`);
    // Only the batches in flight when it was killed come again: at most PLUGIN_DELIVERY_WINDOW × BATCH.
    expect(duplicates).toBeLessThanOrEqual(4 * 100);
    expect((await rig.logs(dest.configId)).filter((l) => l.type === 'ERROR')).toEqual([]);
  });

  it('destinations - a slow destination holds back neither person processing nor another destination', async () => {
    await using rig = await startPluginRig({ PLUGIN_WEBHOOK_IN_FLIGHT: '2' });
    await using slow = await startHttpSink(() => new Promise((r) => setTimeout(() => r(200), 3_000)));
    await using fast = await startHttpSink();
    const source = "export function composeWebhook(event, { config }) { return { url: config.url + '/e', body: event.uuid } }";
    const slowDest = await rig.install(source, { collection: 'pipeline_destinations', name: 'Slow', config: { url: slow.url } });
    await rig.install(source, { collection: 'pipeline_destinations', name: 'Fast', config: { url: fast.url } });
    const p = rig.user.projectId;
    const events = Array.from({ length: 300 }, (_, i) => capture(p, 'e', `user-${i % 31}`, { i }));
    const started = Date.now();
    await publishEvents(rig.js, events);
    await rig.processed(300, 30_000);
    const processedIn = Date.now() - started;
    await waitFor('the fast destination got every event', () => new Set(fast.requests.map((r) => r.body)).size >= 300, 30_000, 100);
    const fastIn = Date.now() - started;
    // The slow one (2 requests at a time, 3 s each) has delivered a handful meanwhile.
    expect(slow.requests.length).toBeLessThan(30);
    expect(processedIn).toBeLessThan(20_000);
    expect(fastIn).toBeLessThan(25_000);
    const metrics = await fetch(`${rig.worker.statusUrl}/metrics`).then((r) => r.text());
    const lag = new RegExp(`spate_worker_plugin_delivery_lag_seconds\\{plugin_config="${slowDest.configId}"[^}]*\\} ([0-9.e+-]+)`).exec(metrics);
    expect(Number(lag?.[1])).toBeGreaterThan(0);
  });

  it('destinations - a disabled config delivers nothing; enabled again, it delivers what was processed meanwhile, once', async () => {
    await using rig = await startPluginRig();
    await using sink = await startHttpSink();
    const hook = await rig.install("export function composeWebhook(event, { config }) { return { url: config.url + '/e', body: event.uuid } }", {
      collection: 'pipeline_destinations',
      name: 'Hook',
      config: { url: sink.url },
    });
    const p = rig.user.projectId;
    const configUrl = `/api/projects/${p}/plugin_configs/${hook.configId}/`;
    const before = Array.from({ length: 20 }, (_, i) => capture(p, 'before', `user-${i}`));
    const meanwhile = Array.from({ length: 20 }, (_, i) => capture(p, 'meanwhile', `user-${i}`));
    await publishEvents(rig.js, before);
    await waitFor('the events before', () => sink.requests.length >= 20, 20_000, 50);
    expect((await rig.f.api('PATCH', configUrl, { key: rig.user.key, body: { enabled: false } })).status).toBe(200);
    await waitFor('the worker let it go', () => !rig.worker.heldPluginConfigs().includes(hook.configId), 20_000, 50);
    await publishEvents(rig.js, meanwhile);
    await rig.processed(40);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(sink.requests).toHaveLength(20);
    expect((await rig.f.api('PATCH', configUrl, { key: rig.user.key, body: { enabled: true } })).status).toBe(200);
    await waitFor('the events processed meanwhile', () => sink.requests.length >= 40, 20_000, 50);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(sink.requests.map((r) => r.body).sort()).toEqual([...before, ...meanwhile].map((e) => e.uuid).sort());
  });
});

describe('plugin scheduled tasks and jobs', () => {
  it('runEveryMinute - once per minute (shortened), across a worker stop and a time with no worker: none twice, none skipped', async () => {
    // A virtual clock: each minute lasts as long as the test takes to look at it.
    let now = Date.parse('2030-01-01T00:00:00.000Z');
    const clock: TaskClock = { now: () => now, periodMs: { runEveryMinute: 1_000, runEveryHour: 3_600_000, runEveryDay: 86_400_000 } };
    await using rig = await startPluginRig({}, { pluginTaskClock: clock });
    await using sink = await startHttpSink();
    const app = await rig.install("export async function runEveryMinute({ config }) { await fetch(config.url + '/tick', { method: 'POST' }) }", {
      collection: 'pipeline_import_apps',
      name: 'Ticker',
      config: { url: sink.url },
    });
    const recorded = async () => (await rig.f.db.query('SELECT 1 FROM plugin_task_runs WHERE plugin_config_id = $1', [app.configId])).rowCount === 1;
    // Its first minute is recorded, not run (as a cron schedule would).
    await waitFor('the first minute recorded', recorded, 20_000, 100);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(sink.requests).toHaveLength(0);
    const minute = async (expected: number) => {
      now += 1_000;
      await waitFor(`run ${expected}`, () => sink.requests.length >= expected, 20_000, 50);
      // And not again within that minute.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(sink.requests).toHaveLength(expected);
    };
    await minute(1);
    await minute(2);
    // A clean stop: the next worker does not run minute 2 again.
    await rig.worker.stop();
    const second = await rig.startWorker();
    await waitFor('the second worker holds it', () => second.heldPluginConfigs().includes(app.configId), 20_000, 50);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(sink.requests).toHaveLength(2);
    await minute(3);
    // No worker while minutes 4 and 5 pass: the next one runs once at once, not once per minute missed.
    await second.stop();
    now += 2_000;
    const third = await rig.startWorker();
    await waitFor('run 4', () => sink.requests.length >= 4, 20_000, 50);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(sink.requests).toHaveLength(4);
    expect(third.heldPluginConfigs()).toEqual([app.configId]);
    const logs = await rig.logs(app.configId);
    expect(logs.filter((l) => l.type === 'ERROR' || l.type === 'WARN')).toEqual([]);
  });

  it('runEveryHour and runEveryDay - each once per period (shortened), aligned on the epoch, beside runEveryMinute', async () => {
    let now = Date.parse('2030-01-01T00:00:00.000Z');
    const clock: TaskClock = { now: () => now, periodMs: { runEveryMinute: 1_000, runEveryHour: 3_000, runEveryDay: 6_000 } };
    await using rig = await startPluginRig({}, { pluginTaskClock: clock });
    await using sink = await startHttpSink();
    const code = ['Minute', 'Hour', 'Day']
      .map((period) => `export async function runEvery${period}({ config }) { await fetch(config.url + '/${period.toLowerCase()}', { method: 'POST' }) }`)
      .join('\n');
    const app = await rig.install(
      code,
      { collection: 'pipeline_import_apps', name: 'Clockwork', config: { url: sink.url } },
    );
    const count = (path: string) => sink.requests.filter((r) => r.path === path).length;
    await waitFor('the first periods recorded', async () => (await rig.f.db.query('SELECT 1 FROM plugin_task_runs WHERE plugin_config_id = $1', [app.configId])).rowCount === 3, 20_000, 100);
    for (let second = 1; second <= 6; second++) {
      now += 1_000;
      const expected = { '/minute': second, '/hour': Math.floor(second / 3), '/day': Math.floor(second / 6) };
      await waitFor(`second ${second}: ${JSON.stringify(expected)}`, () => Object.entries(expected).every(([path, n]) => count(path) >= n), 20_000, 50);
      await new Promise((r) => setTimeout(r, 700));
      expect({ '/minute': count('/minute'), '/hour': count('/hour'), '/day': count('/day') }).toEqual(expected);
    }
    expect((await rig.logs(app.configId)).filter((l) => l.type === 'ERROR' || l.type === 'WARN')).toEqual([]);
  });

  it('runEveryMinute - a run cut short by kill -9 of its worker is reported by the next holder and not run again that minute (real clock: up to a minute)', { timeout: 150_000 }, async () => {
    await using rig = await startPluginRig();
    await rig.worker.stop();
    await using sink = await startHttpSink(() => new Promise((resolve) => setTimeout(() => resolve(200), 20_000)));
    const app = await rig.install("export async function runEveryMinute({ config }) { await fetch(config.url + '/tick', { method: 'POST' }) }", {
      collection: 'pipeline_import_apps',
      name: 'Ticker',
      config: { url: sink.url },
    });
    const env = workerEnv(rig.f.nats.url, rig.f.databaseUrl, { ...FAST_PLUGINS, PLUGIN_WALL_TIMEOUT: '60s' });
    await using procs = workerProcesses(env);
    const a = await procs.spawn('tasks-a');
    // Its first minute is recorded, not run; the next one starts on the minute.
    await waitFor('a run under way', () => sink.requests.length === 1, 90_000, 50);
    const minute = Math.floor(Date.now() / 60_000);
    a.kill('SIGKILL');
    await a.exited;
    await procs.spawn('tasks-b');
    await rig.waitForLog(app.configId, 'the cut-short run reported', (l) => l.source === 'SYSTEM' && l.type === 'WARN' && /^runEveryMinute of \S+ was cut short \(the worker running it stopped\): it is not run again for that period$/.test(l.message), 30_000);
    // Not again in that minute (the next minute's run is due, and allowed).
    const inThatMinute = () => sink.requests.filter((r) => Math.floor(r.at / 60_000) === minute).length;
    await new Promise((r) => setTimeout(r, Math.max(0, Math.min(3_000, (minute + 1) * 60_000 - Date.now() - 200))));
    expect(inThatMinute()).toBe(1);
  });

  it('jobs - a worker deletes the finished job runs whose requests PLUGIN_JOBS no longer keeps; newer and unfinished ones stay', async () => {
    await using rig = await startPluginRig();
    const { config } = await (await jetstreamManager(rig.nc)).streams.info('PLUGIN_JOBS');
    const keptMs = config.max_age / 1_000_000;
    expect(keptMs).toBeGreaterThan(0);
    const row = (id: string, ageMs: number, finished: boolean) =>
      rig.f.db.query(
        `INSERT INTO plugin_job_runs (job_id, plugin_config_id, type, started_at, finished_at, outcome)
         VALUES ($1, 1, 'greet', now() - make_interval(secs => $2), CASE WHEN $3 THEN now() - make_interval(secs => $2) END, CASE WHEN $3 THEN 'ok' END)`,
        [id, ageMs / 1000, finished],
      );
    await row('gone', keptMs + 2 * 3_600_000, true);
    await row('unfinished', keptMs + 2 * 3_600_000, false);
    await row('within the margin', keptMs + 1_800_000, true);
    await row('recent', keptMs / 2, true);
    // A worker prunes when it starts, then hourly.
    await rig.startWorker();
    const ids = async () => (await rig.f.db.query<{ job_id: string }>('SELECT job_id FROM plugin_job_runs ORDER BY job_id')).rows.map((r) => r.job_id);
    await waitFor('the old run deleted', async () => !(await ids()).includes('gone'), 20_000, 100);
    expect(await ids()).toEqual(['recent', 'unfinished', 'within the margin']);
  });

  it('jobs - a job cut short by kill -9 of its worker is reported by the next holder and not run again; the next request runs', async () => {
    await using rig = await startPluginRig();
    await rig.worker.stop();
    // The slow job's request is answered long after the kill: the job is running when its worker dies.
    await using sink = await startHttpSink((r) => (r.path === '/slow' ? new Promise((resolve) => setTimeout(() => resolve(200), 20_000)) : 200));
    const app = await rig.install(
      `export const jobs = {
        slow: async (payload, { config }) => { await fetch(config.url + '/slow', { method: 'POST' }) },
        quick: async (payload, { config }) => { await fetch(config.url + '/quick', { method: 'POST' }) },
      }`,
      { collection: 'pipeline_import_apps', name: 'Jobs', config: { url: sink.url } },
    );
    const job = (type: string) => rig.f.api('POST', `/api/projects/${rig.user.projectId}/plugin_configs/${app.configId}/job/`, { key: rig.user.key, body: { job: { type, payload: {} } } });
    const env = workerEnv(rig.f.nats.url, rig.f.databaseUrl, { ...FAST_PLUGINS, PLUGIN_WALL_TIMEOUT: '60s' });
    await using procs = workerProcesses(env);
    const count = (path: string) => sink.requests.filter((r) => r.path === path).length;
    const a = await procs.spawn('jobs-a');
    expect((await job('slow')).status).toBe(200);
    await waitFor('the slow job running', () => count('/slow') === 1, 30_000, 50);
    a.kill('SIGKILL');
    await a.exited;
    expect((await job('quick')).status).toBe(200);
    await procs.spawn('jobs-b');
    await rig.waitForLog(app.configId, 'the cut-short job reported', (l) => l.source === 'SYSTEM' && l.type === 'WARN' && /^Job "slow" \([0-9a-f-]+\), started .*, was cut short: the worker running it stopped\. It is not run again\.$/.test(l.message), 60_000);
    await waitFor('the next job', () => count('/quick') === 1, 30_000, 50);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(count('/slow')).toBe(1);
    expect(count('/quick')).toBe(1);
  });

  it('jobs - POST …/job/ runs the job once with its payload; read again, it does not run again; an unknown job is an ERROR', async () => {
    await using rig = await startPluginRig();
    await using sink = await startHttpSink();
    const app = await rig.install(
      "export const jobs = { greet: async (payload, { config }) => { await fetch(config.url + '/greet', { method: 'POST', body: JSON.stringify(payload) }) } }\nexport function runEveryDay() {}",
      { collection: 'pipeline_import_apps', name: 'Jobs', config: { url: sink.url } },
    );
    const job = (body: unknown) => rig.f.api('POST', `/api/projects/${rig.user.projectId}/plugin_configs/${app.configId}/job/`, { key: rig.user.key, body });
    expect((await job({ job: { type: 'greet', payload: { name: 'Ada' } } })).status).toBe(200);
    await waitFor('the job', () => sink.requests.length >= 1, 20_000, 50);
    expect(JSON.parse(sink.requests[0]!.body)).toEqual({ name: 'Ada', $operation: 'start' });
    await rig.waitForLog(app.configId, 'the job ran', (l) => l.source === 'SYSTEM' && /^Job "greet" \([0-9a-f-]+\) ran in \d+ ms\.$/.test(l.message));
    expect((await job({ job: { type: 'nope', payload: {} } })).status).toBe(200);
    await rig.waitForLog(app.configId, 'the unknown job', (l) => l.type === 'ERROR' && l.message.startsWith('Job "nope" ('));
    // Another worker reads the requests again from the stream: neither runs again.
    await rig.worker.stop();
    const next = await rig.startWorker();
    await waitFor('the next worker holds it', () => next.heldPluginConfigs().includes(app.configId), 20_000, 50);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(sink.requests).toHaveLength(1);
    expect((await rig.logs(app.configId)).filter((l) => l.type === 'ERROR')).toHaveLength(1);
  });
});
