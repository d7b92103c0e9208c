import { afterEach, describe, expect, it, vi } from 'vitest';
import { compilePluginSource } from '../../../lib/index.js';
import { MAX_HOST_CALLS_IN_FLIGHT, Sandbox, SandboxError, type SandboxBatch, type SandboxHost, type SandboxLimits } from './index.js';

const LIMITS: SandboxLimits = { memoryBytes: 16 * 1024 * 1024, stackBytes: 256 * 1024, cpuMs: 100, wallMs: 2_000 };
const open: Sandbox[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.dispose();
});

function recordingHost(calls: Record<string, (args: unknown) => unknown> = {}) {
  const logs: Array<[string, string]> = [];
  const ops: Array<[string, unknown]> = [];
  const host: SandboxHost = {
    log: (level, message) => logs.push([level, message]),
    call: (op, args) => {
      ops.push([op, args]);
      const fn = calls[op];
      return fn ? Promise.resolve(fn(args)) : Promise.reject(new Error(`no ${op}`));
    },
  };
  return { host, logs, ops };
}

async function sandbox(source: string, options: { host?: SandboxHost; config?: Record<string, unknown>; limits?: Partial<SandboxLimits> } = {}): Promise<Sandbox> {
  const compiled = await compilePluginSource(new Map([['index.ts', source]]));
  const s = await Sandbox.create({ code: compiled!.code, file: 'index.ts', config: options.config ?? {}, limits: { ...LIMITS, ...options.limits }, host: options.host ?? recordingHost().host });
  open.push(s);
  return s;
}

function events(n: number): SandboxBatch & { events: Array<Record<string, unknown> & { properties: Record<string, unknown> }> } {
  return {
    teamId: 7,
    events: Array.from({ length: n }, (_, i) => ({
      uuid: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`,
      event: i % 2 ? '$pageview' : 'clicked',
      distinct_id: `user-${i}`,
      properties: { $current_url: `https://example.com/${i}`, n: i, nested: { a: i } },
      timestamp: '2026-11-26T10:00:00.000Z',
      now: '2026-11-26T10:00:00.000Z',
      token: 'phc_secret',
      project_id: 7,
    })),
  };
}

describe('plugin sandbox', () => {
  it('sandbox - a batch crosses once: changed properties come back as a patch, untouched events as nothing', async () => {
    const s = await sandbox(`export function processEvent(event) {
      if (event.event === '$pageview') event.properties.seen = event.properties.$current_url + '#' + event.team_id
      return event
    }`);
    expect(s.methods).toEqual(new Set(['processEvent']));
    const out = await s.runBatch('processEvent', 'event', events(4));
    expect(out).toEqual([
      { kind: 'patch', index: 1, top: [], topDeleted: [], properties: [['seen', 'https://example.com/1#7']], propertiesDeleted: [], replaced: undefined, size: expect.any(Number) },
      { kind: 'patch', index: 3, top: [], topDeleted: [], properties: [['seen', 'https://example.com/3#7']], propertiesDeleted: [], replaced: undefined, size: expect.any(Number) },
    ]);
  });

  it('sandbox - drops, throws, other objects, deletes and nested changes each come back as such', async () => {
    const s = await sandbox(`export function processEvent(event) {
      const n = event.properties.n
      if (n === 0) return null
      if (n === 1) throw new RangeError('bad ' + event.uuid)
      if (n === 2) return { ...event, event: 'renamed' }
      if (n === 3) { delete event.properties.n; event.properties.nested.b = 1; event.distinct_id = 'x'; return event }
      if (n === 4) return 'nope'
      return event
    }`);
    const batch = events(6);
    const out = await s.runBatch('processEvent', 'event', batch);
    expect(out[0]).toEqual({ kind: 'null', index: 0 });
    expect(out[1]).toEqual({ kind: 'error', index: 1, name: 'RangeError', message: `bad ${String(batch.events[1]!.uuid)}` });
    // The plugin sees team_id, never the token or project_id.
    const { token: _t, project_id: _p, ...visible } = batch.events[2]!;
    expect(out[2]).toEqual({ kind: 'result', index: 2, value: { ...visible, team_id: 7, event: 'renamed' }, size: expect.any(Number) });
    expect(out[3]).toMatchObject({ kind: 'patch', index: 3, top: [['distinct_id', 'x']], properties: [['nested', { a: 3, b: 1 }]], propertiesDeleted: ['n'] });
    expect(out[4]).toMatchObject({ kind: 'error', index: 4, name: 'TypeError', message: 'processEvent returned string, not an event or null' });
    expect(out).toHaveLength(5);
  });

  it('sandbox - an event processEvent keeps past its call: what its batch read stays readable, the rest fails clearly', async () => {
    const s = await sandbox(`let kept
    export function processEvent(event) {
      if (kept === undefined) {
        kept = event
        return event.properties.n === 0 ? event : null
      }
      event.properties.kept = kept.properties.n
      if (event.properties.n === 1) event.properties.late = kept.properties.$current_url
      if (event.properties.n === 2) event.properties.keys = Object.keys(kept.properties).join(',')
      return event
    }`);
    await s.runBatch('processEvent', 'event', events(1));
    const out = await s.runBatch('processEvent', 'event', events(3));
    expect(out[0]).toMatchObject({ kind: 'patch', index: 0, properties: [['kept', 0]] });
    // Were SyntaxError "unexpected token: 'undefined'" and a TypeError of the prelude's own code.
    const tooLate = { name: 'TypeError', message: expect.stringMatching(/^an event given to processEvent can be read only until the call returns/) };
    expect(out[1]).toEqual({ kind: 'error', index: 1, ...tooLate });
    expect(out[2]).toEqual({ kind: 'error', index: 2, ...tooLate });
  });

  it('sandbox - a field is fetched once per batch, whatever the number of events that read it', async () => {
    const s = await sandbox('export const processEvent = (e) => { e.properties.u = e.properties.$current_url + e.event; return e }');
    const batch = events(500);
    let reads = 0;
    const counted = new Proxy(batch.events, {
      get(target, key) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key) as unknown;
      },
    });
    const out = await s.runBatch('processEvent', 'event', { teamId: 7, events: counted });
    expect(out).toHaveLength(500);
    // Two fields read: each fetched for the whole batch once (one pass over the events each).
    expect(reads).toBe(2 * 500);
  });

  it('sandbox - read-only methods: composeWebhook values, onEvent errors; the event is what the plugin sees, its changes its own', async () => {
    const s = await sandbox(`export function composeWebhook(event, { config }) {
      if (event.properties.n === 1) return null
      if (event.properties.n === 2) event.properties.added = true
      if (event.properties.n === 3) throw new Error('no ' + event.event)
      return { url: config.url, body: JSON.stringify(event), props: JSON.stringify(event.properties) }
    }
    export function onEvent(event) { if (event.properties.n === 0) throw new RetryError('later') }`, { config: { url: 'http://sink.example/' } });
    const batch = events(4);
    const out = await s.runBatch('composeWebhook', 'value', batch);
    const visible = (i: number) => {
      const { token: _t, project_id: _p, ...rest } = batch.events[i]!;
      return { ...rest, team_id: 7 };
    };
    expect(out.map((o) => o.kind)).toEqual(['result', 'null', 'result', 'error']);
    const body = (i: number) => (out[i] as { value: { body: string; props: string } }).value;
    expect(JSON.parse(body(0).body)).toEqual(visible(0));
    expect(JSON.parse(body(0).props)).toEqual(batch.events[0]!.properties);
    // A changed event is sent as changed.
    const changed = visible(2);
    expect(JSON.parse(body(2).body)).toEqual({ ...changed, properties: { ...changed.properties, added: true } });
    expect(JSON.parse(body(2).props)).toEqual({ ...batch.events[2]!.properties, added: true });
    expect(out[3]).toMatchObject({ kind: 'error', name: 'Error', message: 'no $pageview' });
    expect(await s.runBatch('onEvent', 'void', batch)).toEqual([{ kind: 'error', index: 0, name: 'RetryError', message: 'later' }]);
  });

  it('sandbox - webhooks: the whole event, another event, a changed event and URLs that alternate each come back as composed', async () => {
    const s = await sandbox(`var first = null
    export function composeWebhook(event, { config }) {
      first = first || event
      const n = event.properties.n
      if (n === 1) return { url: config.url + 'b', body: JSON.stringify(first) }
      if (n === 2) event.properties.added = true
      return { url: config.url + (n % 2 ? 'b' : 'a'), body: JSON.stringify(event) }
    }`, { config: { url: 'http://sink.example/' } });
    const batch = events(4);
    const visible = (i: number) => {
      const { token: _t, project_id: _p, ...rest } = batch.events[i]!;
      return { ...rest, team_id: 7 };
    };
    for (let round = 0; round < 2; round++) {
      const out = await s.runBatch('composeWebhook', 'value', batch);
      const sent = out.map((o) => (o as { value: { url: string; body: string } }).value);
      expect(sent.map((w) => w.url)).toEqual(['http://sink.example/a', 'http://sink.example/b', 'http://sink.example/a', 'http://sink.example/b']);
      // Event 1's webhook carries event 0 (the first event the engine saw).
      expect(sent.map((w) => JSON.parse(w.body) as unknown)).toEqual([
        visible(0),
        visible(0),
        { ...visible(2), properties: { ...visible(2).properties, added: true } },
        visible(3),
      ]);
    }
  });

  it('sandbox - events a read-only method keeps past its call stay whole (a buffer across batches)', async () => {
    const { host, logs } = recordingHost();
    const s = await sandbox(
      `export function onEvent(e, { global }) {
        (global.buf ||= []).push(e)
        if (global.buf.length >= 3) {
          console.log(JSON.stringify(global.buf))
          console.log(global.buf.map((x) => x.properties.n + ':' + x.event + ':' + Object.keys(x).length + ':' + JSON.stringify(x.properties)).join(','))
          global.buf = []
        }
      }`,
      { host },
    );
    const first = events(2);
    const second = events(2);
    expect(await s.runBatch('onEvent', 'void', first)).toEqual([]);
    expect(await s.runBatch('onEvent', 'void', second)).toEqual([]);
    const visible = (e: Record<string, unknown>) => {
      const { token: _t, project_id: _p, ...rest } = e;
      return { ...rest, team_id: 7 };
    };
    expect(JSON.parse(logs[0]![1])).toEqual([visible(first.events[0]!), visible(first.events[1]!), visible(second.events[0]!)]);
    const props = (i: number) => JSON.stringify(first.events[i]!.properties);
    expect(logs[1]).toEqual(['LOG', `0:clicked:7:${props(0)},1:$pageview:7:${props(1)},0:clicked:7:${props(0)}`]);
  });

  it('sandbox - a "__proto__" property of an event a read-only method kept stays a property when read after its batch', async () => {
    const { host, logs } = recordingHost();
    const s = await sandbox(
      `export function onEvent(e, { global }) {
        if (global.kept === undefined) global.kept = e
        else console.log(Object.keys(global.kept.properties).join(',') + ' tier=' + global.kept.properties.tier + ' ' + JSON.stringify(global.kept.properties))
      }`,
      { host },
    );
    const first = events(1);
    // As JSON.parse made it from the captured line: an own key.
    first.events[0]!.properties = JSON.parse('{"__proto__":{"tier":"gold"},"n":0}') as Record<string, unknown>;
    await s.runBatch('onEvent', 'void', first);
    await s.runBatch('onEvent', 'void', events(1));
    expect(logs).toEqual([['LOG', '__proto__,n tier=undefined {"__proto__":{"tier":"gold"},"n":0}']]);
  });

  it('sandbox - a looping event times out alone; the batch goes on and the engine stays usable', async () => {
    const s = await sandbox('export function processEvent(event) { if (event.properties.n === 2) { while (true) {} } event.properties.ok = true; return event }', { limits: { cpuMs: 50 } });
    const started = performance.now();
    const out = await s.runBatch('processEvent', 'event', events(5));
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(out.map((o) => [o.index, o.kind])).toEqual([
      [0, 'patch'],
      [1, 'patch'],
      [2, 'timeout'],
      [3, 'patch'],
      [4, 'patch'],
    ]);
    expect(out[2]).toMatchObject({ message: 'ran for more than 50 ms of CPU time' });
    expect(await s.runBatch('processEvent', 'event', { teamId: 7, events: events(2).events })).toHaveLength(2);
  });

  it('sandbox - a plugin slow on every event never holds the event loop for more than the CPU limit, and a batch for a few timeouts', async () => {
    // Every event loops: 40 events would hold the loop 40 × 50 ms.
    const s = await sandbox('export function processEvent(event) { while (true) {} }', { limits: { cpuMs: 50, batchTimeouts: 5 } });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    const started = performance.now();
    const out = await s.runBatch('processEvent', 'event', events(40));
    const took = performance.now() - started;
    clearInterval(timer);
    expect(out.map((o) => o.kind)).toEqual(Array(40).fill('timeout'));
    expect(out[4]).toMatchObject({ message: 'ran for more than 50 ms of CPU time' });
    expect(out[5]).toMatchObject({ message: 'was not run: the plugin ran out of CPU time on 5 events of this batch' });
    expect(took).toBeLessThan(1_500);
    // Between the engine's calls the loop ran (each call ≤ 50 ms; without yielding: never).
    expect(ticks).toBeGreaterThanOrEqual(2);
    // Under the limit (20 ms an event, 200 ms a call) nothing is stopped, and the loop still runs between calls.
    const slow = await sandbox('export function processEvent(event) { const end = Date.now() + 20; while (Date.now() < end) {} event.properties.ok = 1; return event }', { limits: { cpuMs: 200, batchTimeouts: 5 } });
    ticks = 0;
    const again = setInterval(() => ticks++, 5);
    const done = await slow.runBatch('processEvent', 'event', events(40));
    clearInterval(again);
    expect(done.map((o) => o.kind)).toEqual(Array(40).fill('patch'));
    expect(ticks).toBeGreaterThanOrEqual(2);
  });

  it('sandbox - deep recursion fails in the plugin; an overflow of Node\'s own stack breaks only that engine', async () => {
    const s = await sandbox(`export function processEvent(event) {
      if (event.properties.n === 0) { const f = (n) => f(n + 1) + 1; f(0) }
      if (event.properties.n === 1) { const g = (n) => (n === 300 ? 0 : g(n + 1) + 1); event.properties.depth = g(0) }
      return event
    }`);
    const out = await s.runBatch('processEvent', 'event', events(2));
    expect(out[0]).toMatchObject({ kind: 'error', index: 0, message: expect.stringMatching(/stack overflow/) });
    expect(out[1]).toMatchObject({ kind: 'patch', index: 1, properties: [['depth', 300]] });
    expect(s.broken).toBe(false);
    // JSON of a deeply nested value recurses in the engine's C code, which Node's stack does not hold.
    const deep = await sandbox(`export function processEvent(event) {
      let a = []
      for (let i = 0; i < 200000; i++) a = [a]
      event.properties.deep = JSON.stringify(a).length
      return event
    }`, { limits: { cpuMs: 5_000 } });
    const failed = await deep.runBatch('processEvent', 'event', events(2));
    expect(failed).toEqual([
      { kind: 'error', index: 0, name: 'InternalError', message: 'stack overflow' },
      { kind: 'error', index: 1, name: 'InternalError', message: 'stack overflow' },
    ]);
    expect(deep.broken).toBe(true);
    await expect(deep.runBatch('processEvent', 'event', events(1))).resolves.toEqual([{ kind: 'error', index: 0, name: 'InternalError', message: 'the engine failed before' }]);
  });

  it('sandbox - a lone surrogate a plugin makes (cutting an emoji in two) crosses back as the replacement character', async () => {
    const s = await sandbox(`export function processEvent(event) { event.properties.cut = 'Hello 😀 world'.slice(0, 7); event.properties.after = 'ok'; return event }
    export function composeWebhook(event) { return { url: 'http://sink.example/' + 'x😀'.slice(0, 2), body: 'Hello 😀'.slice(0, 7) + event.event } }`);
    const out = await s.runBatch('processEvent', 'event', events(2));
    expect(out.map((o) => (o as { properties: unknown }).properties)).toEqual([
      [
        ['cut', 'Hello \uFFFD'],
        ['after', 'ok'],
      ],
      [
        ['cut', 'Hello \uFFFD'],
        ['after', 'ok'],
      ],
    ]);
    const hooks = await s.runBatch('composeWebhook', 'value', events(2));
    expect(hooks.map((o) => (o as { value: unknown }).value)).toEqual([
      // The url crosses inside JSON, which escapes a lone surrogate (it stays one); the body crosses raw.
      { url: 'http://sink.example/x\ud83d', body: 'Hello \uFFFDclicked' },
      { url: 'http://sink.example/x\ud83d', body: 'Hello \uFFFD$pageview' },
    ]);
  });

  it('sandbox - allocating without bound is stopped by the memory limit', async () => {
    const s = await sandbox('const kept: object[] = []\nexport function processEvent(event) { for (;;) kept.push({ n: kept.length, list: [kept.length, "item " + kept.length] }) }', { limits: { memoryBytes: 8 * 1024 * 1024, cpuMs: 10_000 } });
    const out = await s.runBatch('processEvent', 'event', events(1));
    expect(out).toEqual([{ kind: 'error', index: 0, name: 'InternalError', message: 'out of memory' }]);
  });

  it('sandbox - async methods await the host (fetch, storage, cache); meta.global and meta.config persist', async () => {
    const { host, ops, logs } = recordingHost({
      fetch: () => ({ status: 200, statusText: 'OK', url: 'https://api.example/x', headers: [['content-type', 'application/json']], body: '{"country":"NZ"}' }),
      'cache.incr': () => 3,
    });
    const s = await sandbox(
      `export async function setupPlugin(meta) { meta.global.prefix = meta.config.prefix; console.log('set up', { prefix: meta.global.prefix }) }
       export async function processEvent(event, { global, cache }) {
         const res = await fetch('https://api.example/x?id=' + event.distinct_id)
         event.properties.country = global.prefix + (await res.json()).country
         event.properties.count = await cache.incr('seen')
         return event
       }`,
      { host, config: { prefix: '>' } },
    );
    expect(await s.call('setupPlugin')).toBeNull();
    expect(logs).toEqual([['LOG', 'set up {"prefix":">"}']]);
    const out = await s.runBatch('processEvent', 'event', events(2));
    expect(out.map((o) => (o.kind === 'patch' ? o.properties : o))).toEqual([
      [['country', '>NZ'], ['count', 3]],
      [['country', '>NZ'], ['count', 3]],
    ]);
    expect(ops.filter(([op]) => op === 'fetch').map(([, a]) => (a as { url: string }).url)).toEqual(['https://api.example/x?id=user-0', 'https://api.example/x?id=user-1']);
  });

  it('sandbox - batches in flight at once on one engine each go on as soon as what they await settles', async () => {
    const { host } = recordingHost({ 'cache.get': () => new Promise((r) => setTimeout(() => r({ value: 1 }), 50)) });
    const s = await sandbox('export async function onEvent(event, { cache }) { await cache.get(event.uuid) }', { host });
    const started = performance.now();
    const outcomes = await Promise.all([s.runBatch('onEvent', 'void', events(3)), s.runBatch('onEvent', 'void', events(3)), s.runBatch('onEvent', 'void', events(3))]);
    expect(outcomes).toEqual([[], [], []]);
    // Not one after the other's wall time (2 s): each is woken by its own host calls.
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  it('sandbox - a plugin starting host calls without bound holds at most MAX_HOST_CALLS_IN_FLIGHT; the rest fail in the plugin', async () => {
    let now = 0;
    let most = 0;
    const { host } = recordingHost({
      'cache.get': () => {
        most = Math.max(most, ++now);
        return new Promise((r) => setTimeout(() => r({ value: 1 }), 50)).finally(() => now--);
      },
    });
    const s = await sandbox(
      `export async function processEvent(event, { cache }) {
        const all = await Promise.allSettled(Array.from({ length: 200 }, (_, i) => cache.get('k' + i)))
        event.properties.refused = all.filter((r) => r.status === 'rejected').length
        event.properties.why = all.find((r) => r.status === 'rejected')?.reason?.message
        return event
      }`,
      { host },
    );
    const [out] = await s.runBatch('processEvent', 'event', events(1));
    expect(most).toBe(MAX_HOST_CALLS_IN_FLIGHT);
    expect(out).toMatchObject({ kind: 'patch', properties: [['refused', 200 - MAX_HOST_CALLS_IN_FLIGHT], ['why', expect.stringContaining(`more than ${MAX_HOST_CALLS_IN_FLIGHT}`)]] });
    // Once they are answered, calls go through again.
    const [again] = await s.runBatch('processEvent', 'event', events(1));
    expect(again).toMatchObject({ properties: [['refused', 200 - MAX_HOST_CALLS_IN_FLIGHT], expect.anything()] });
  });

  it('sandbox - results a plugin forges for events outside its batch are ignored', async () => {
    // The prelude joins a batch's results with Array.prototype.join, which the plugin can replace.
    const s = await sandbox(
      `const join = Array.prototype.join
       Array.prototype.join = function (sep) {
         const text = join.call(this, sep)
         return sep === '' && text.startsWith('@') ? text + '@7;N' : text
       }
       export function processEvent(event) { return event.properties.n === 0 ? null : event }`,
    );
    // One record of its own and one forged: no more than the batch's events, so decoded; the forged one is dropped.
    const out = await s.runBatch('processEvent', 'event', events(2));
    expect(out.map((o) => [o.index, o.kind])).toEqual([[0, 'null']]);
  });

  it('sandbox - forged pending lists and more records than events are refused, not trusted', async () => {
    // The prelude lists pending events with Array.prototype.join, which the plugin can replace.
    const pendingForged = await sandbox(
      `const join = Array.prototype.join
       export function onEvent(event) {
         Array.prototype.join = function (sep) { return sep === ',' ? '7,x' : join.call(this, sep) }
         return new Promise(() => {})
       }`,
      { limits: { wallMs: 200 } },
    );
    const out = await pendingForged.runBatch('onEvent', 'void', events(3));
    expect(out.every((o) => o.index >= 0 && o.index < 3)).toBe(true);
    // Millions of records for a batch of two would cost the host memory to decode.
    const flood = await sandbox(
      `const join = Array.prototype.join
       Array.prototype.join = function (sep) {
         const text = join.call(this, sep)
         return sep === '' && text.startsWith('@') ? text + '@0;N'.repeat(100000) : text
       }
       export function processEvent(event) { return null }`,
    );
    await expect(flood.runBatch('processEvent', 'event', events(2))).rejects.toThrow(/more records than the batch's 2 events/);
  });

  it('sandbox - a promise that never settles, or one slower than the wall time, times out', async () => {
    const { host } = recordingHost({ 'storage.get': () => new Promise((r) => setTimeout(() => r(null), 5_000)) });
    const s = await sandbox(
      `export async function processEvent(event, meta) {
        if (event.properties.n === 0) await new Promise(() => {})
        if (event.properties.n === 1) await meta.storage.get('slow')
        return event
      }`,
      { host, limits: { wallMs: 300 } },
    );
    const out = await s.runBatch('processEvent', 'event', events(3));
    expect(out.map((o) => [o.index, o.kind])).toEqual([
      [0, 'timeout'],
      [1, 'timeout'],
    ]);
  });

  it('sandbox - the plugin cannot reach the host beyond what it is given', async () => {
    const s = await sandbox(`export function processEvent(event) {
      event.properties.escape = [typeof process, typeof globalThis.__spateHost, typeof setTimeout, (function () { return typeof this })()].join(',')
      event.properties.ctor = ({}).constructor.constructor('return [typeof process, typeof globalThis.process, typeof std].join()')()
      return event
    }`);
    const [out] = await s.runBatch('processEvent', 'event', events(1));
    expect(out).toMatchObject({ properties: [['escape', 'undefined,undefined,undefined,undefined'], ['ctor', 'undefined,undefined,undefined']] });
  });

  it('sandbox - load errors and missing methods are SandboxErrors', async () => {
    const err = await sandbox('throw new Error("at load")').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).code).toBe('load_failed');
    expect((err as SandboxError).message).toContain('Error: at load');
    const s = await sandbox('export function onEvent() {}');
    await expect(s.runBatch('processEvent', 'event', events(1))).rejects.toMatchObject({ code: 'missing_method' });
  });

  it('sandbox - a failed load and a failed setupPlugin free every handle: the engine is freed without aborting', async () => {
    // QuickJS aborts its engine (printing through console.error) when a runtime is freed while a
    // handle still holds one of its objects.
    const printed = vi.spyOn(console, 'error');
    try {
      const err = await sandbox('throw new Error("at load")').catch((e: unknown) => e);
      expect((err as SandboxError).code).toBe('load_failed');
      const s = await sandbox('export async function setupPlugin() { throw new Error("no database") }');
      await expect(s.call('setupPlugin')).rejects.toMatchObject({ code: 'threw', message: 'Error: no database' });
      await expect(s.call('setupPlugin')).rejects.toMatchObject({ code: 'threw' });
      s.dispose();
      expect(printed.mock.calls.map((args) => args.join(' ')).filter((line) => line.includes('Aborted'))).toEqual([]);
    } finally {
      printed.mockRestore();
    }
  });
});
