// One plugin instance's isolation boundary: a QuickJS engine of its own (its own WebAssembly
// instance and linear memory), a memory limit, a stack limit, and a CPU time limit per event
// enforced by QuickJS's interrupt handler, so a `while (true)` is stopped where it runs. The plugin
// reaches the host only through the functions given here (column reads, logs, fetch, storage,
// cache), never Node itself.
//
// A batch of events crosses once (runBatch): the engine runs the method on every event and sends
// back one result string (prelude.ts, results.ts). The CPU limit applies per event: the interrupt
// ends the call where it runs; the host reads which event was running and calls again from there
// with a fresh budget, so an event is blamed only once it has used a whole budget alone.
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { QuickJSContext, QuickJSDeferredPromise, QuickJSHandle, QuickJSRuntime } from 'quickjs-emscripten-core';
import { newQuickJS, PLUGIN_CODE_PREFIX, PLUGIN_CODE_SUFFIX } from '../../../lib/index.js';
import { columnText, eventTexts } from './columns.js';
import { PRELUDE } from './prelude.js';
import { decodeResults, type EventOutcome } from './results.js';

/** Host calls (fetch, storage, cache) one engine may have awaiting their answer at once. */
export const MAX_HOST_CALLS_IN_FLIGHT = 64;

/** An event as the host holds it: a plugin sees its fields (but `token`, `project_id`) and `team_id`. */
export interface SandboxEvent {
  readonly properties: Readonly<Record<string, unknown>>;
}

export interface SandboxBatch {
  /** The project of every event of the batch: what plugins see as `team_id`. */
  readonly teamId: number;
  readonly events: readonly SandboxEvent[];
}

export interface SandboxLimits {
  /** Memory of the engine (QuickJS heap), bytes. */
  memoryBytes: number;
  /**
   * Stack of the engine, bytes: past it, deep recursion throws a RangeError in the plugin. Keep it
   * well under what Node's own stack holds (~1 MB): the engine's frames run on it too, and an
   * overflow there breaks the engine (it is replaced, its batch fails).
   */
  stackBytes: number;
  /** CPU time one event (or one call) may run in the engine, ms (time waiting on the host excluded). */
  cpuMs: number;
  /** Wall time a batch or call may wait for what it awaits (fetch, storage, cache), ms. */
  wallMs: number;
  /**
   * Events of one batch that may run out of CPU time: past them the rest of the batch is not run
   * (each a timeout), so a plugin that times out on every event holds a batch for this many
   * timeouts, not one per event. 0 or absent: no bound.
   */
  batchTimeouts?: number;
}

/** What the sandbox asks of the host. */
export interface SandboxHost {
  log(level: 'DEBUG' | 'LOG' | 'INFO' | 'WARN' | 'ERROR', message: string): void;
  /** fetch, storage.get/set/del, cache.get/set/incr/expire; resolves to a JSON-able value. */
  call(op: string, args: unknown): Promise<unknown>;
}

/**
 * How each event of a batch came out. `processEvent` gives `patch`, `result` or `null` (the
 * changes, another object, a drop); `onEvent` only errors; `composeWebhook` `result` or `null`.
 * Events without an outcome came back unchanged (or, for onEvent, were delivered).
 */
export type BatchMode = 'event' | 'void' | 'value';
export type BatchOutcome = EventOutcome | { kind: 'timeout'; index: number; message: string };

export type SandboxErrorCode = 'load_failed' | 'timeout' | 'out_of_memory' | 'threw' | 'missing_method' | 'disposed' | 'broken';

export class SandboxError extends Error {
  override name = 'SandboxError';
  constructor(
    readonly code: SandboxErrorCode,
    message: string,
    /** The plugin's error name (RetryError, TypeError, …) when it threw. */
    readonly pluginErrorName?: string,
  ) {
    super(message);
  }
}

const METHOD_NAMES = ['setupPlugin', 'teardownPlugin', 'processEvent', 'onEvent', 'composeWebhook', 'runEveryMinute', 'runEveryHour', 'runEveryDay', 'getSettings'];
// Plugins written as plain scripts (no exports) define their methods as top-level functions.
const CAPTURE_GLOBALS = METHOD_NAMES.map((m) => `if (typeof ${m} === 'function' && !('${m}' in exports)) exports.${m} = ${m};`).join(' ');

interface DumpedError {
  name?: unknown;
  message?: unknown;
  lineNumber?: unknown;
}

function errorText(e: unknown): { name: string; message: string } {
  if (typeof e === 'object' && e !== null) {
    const d = e as DumpedError;
    return { name: typeof d.name === 'string' ? d.name : 'Error', message: typeof d.message === 'string' ? d.message : JSON.stringify(e) };
  }
  return { name: 'Error', message: String(e) };
}

const isInterrupt = (e: { name: string; message: string }) => e.name === 'InternalError' && e.message === 'interrupted';
const isOutOfMemory = (e: { name: string; message: string }) => e.name === 'InternalError' && e.message === 'out of memory';

export class Sandbox {
  /** The methods the plugin exports (and `job:<name>` for meta.jobs). */
  readonly methods: ReadonlySet<string>;
  private deadline = 0;
  private disposedFlag = false;
  private brokenFlag = false;
  private batchSeq = 0;
  private readonly batches = new Map<number, SandboxBatch>();
  private readonly deferreds = new Set<QuickJSDeferredPromise>();
  private opsInFlight = 0;
  /** What waits for a host call to settle: every batch and call in flight on this engine. */
  private readonly opWaiters = new Set<() => void>();

  private constructor(
    private readonly rt: QuickJSRuntime,
    private readonly vm: QuickJSContext,
    private readonly api: { run: QuickJSHandle; collect: QuickJSHandle; progress: QuickJSHandle; pending: QuickJSHandle; call: QuickJSHandle; load: QuickJSHandle },
    private readonly limits: SandboxLimits,
    methods: string[],
  ) {
    this.methods = new Set(methods);
  }

  /**
   * Starts an engine, loads the prelude and the plugin's compiled code (lib/plugin-source.ts),
   * and builds `meta` with `config`. Throws SandboxError load_failed when the code throws or
   * runs out of time or memory while loading.
   */
  static async create(options: { code: string; file: string; config: Record<string, unknown>; limits: SandboxLimits; host: SandboxHost }): Promise<Sandbox> {
    const quickjs = await newQuickJS();
    const rt = quickjs.newRuntime();
    rt.setMemoryLimit(options.limits.memoryBytes);
    rt.setMaxStackSize(options.limits.stackBytes);
    const vm = rt.newContext();
    // Filled in below; host functions close over it.
    const box: { sandbox?: Sandbox } = {};
    // Every handle must be freed before the runtime is (QuickJS asserts and aborts the engine).
    let api: Sandbox['api'] | undefined;
    try {
      vm.newObject().consume((host) => {
        vm.newFunction('column', (id, key) => {
          const batch = box.sandbox?.batches.get(vm.getNumber(id));
          if (!batch) return { error: vm.newError('no such batch') };
          return vm.newString(columnText(batch, vm.getString(key)));
        }).consume((fn) => vm.setProp(host, 'column', fn));
        vm.newFunction('properties', (id, index) => {
          const event = box.sandbox?.batches.get(vm.getNumber(id))?.events[vm.getNumber(index)];
          if (!event) return { error: vm.newError('no such event') };
          return vm.newString(JSON.stringify(event.properties));
        }).consume((fn) => vm.setProp(host, 'properties', fn));
        vm.newFunction('log', (level, message) => {
          options.host.log(vm.getString(level) as 'LOG', vm.getString(message));
        }).consume((fn) => vm.setProp(host, 'log', fn));
        vm.newFunction('call', (op, args) => box.sandbox!.hostCall(options.host, vm.getString(op), vm.getString(args))).consume((fn) => vm.setProp(host, 'call', fn));
        vm.setProp(vm.global, '__spateHost', host);
      });
      const apiHandle = vm.unwrapResult(vm.evalCode(PRELUDE, 'spate-prelude.js'));
      const fns = (api = {
        run: vm.getProp(apiHandle, 'run'),
        collect: vm.getProp(apiHandle, 'collect'),
        progress: vm.getProp(apiHandle, 'progress'),
        pending: vm.getProp(apiHandle, 'pending'),
        call: vm.getProp(apiHandle, 'call'),
        load: vm.getProp(apiHandle, 'load'),
      });
      apiHandle.dispose();
      const deadline = () => performance.now() + options.limits.cpuMs;
      let until = deadline();
      rt.setInterruptHandler(() => performance.now() > until);
      const factory = vm.evalCode(`${PLUGIN_CODE_PREFIX}${options.code}\n;${CAPTURE_GLOBALS}${PLUGIN_CODE_SUFFIX}`, options.file, { strict: true });
      if (factory.error) throw Sandbox.loadError(vm, factory.error);
      until = deadline();
      const loaded = vm.newString(JSON.stringify(options.config)).consume((config) => vm.callFunction(fns.load, vm.undefined, factory.value, config));
      factory.value.dispose();
      if (loaded.error) throw Sandbox.loadError(vm, loaded.error);
      const methods = vm.getString(loaded.value).split(',').filter(Boolean);
      loaded.value.dispose();
      const sandbox = new Sandbox(rt, vm, fns, options.limits, methods);
      box.sandbox = sandbox;
      rt.setInterruptHandler(() => sandbox.deadline !== 0 && performance.now() > sandbox.deadline);
      return sandbox;
    } catch (err) {
      try {
        for (const h of Object.values(api ?? {})) h.dispose();
        vm.dispose();
        rt.dispose();
      } catch {
        // The engine is discarded either way; its memory goes with its WebAssembly instance.
      }
      if (err instanceof SandboxError) throw err;
      throw new SandboxError('load_failed', `the plugin could not be loaded: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private static loadError(vm: QuickJSContext, handle: QuickJSHandle): SandboxError {
    const dumped = vm.dump(handle) as DumpedError;
    handle.dispose();
    const e = errorText(dumped);
    if (isInterrupt(e)) return new SandboxError('load_failed', 'the plugin ran out of time while loading');
    if (isOutOfMemory(e)) return new SandboxError('load_failed', 'the plugin ran out of memory while loading');
    const line = typeof dumped.lineNumber === 'number' ? ` (line ${dumped.lineNumber})` : '';
    return new SandboxError('load_failed', `${e.name}: ${e.message}${line}`);
  }

  get disposed(): boolean {
    return this.disposedFlag;
  }

  /** The engine failed (ran out of memory where even an error cannot be made): replace it. */
  get broken(): boolean {
    return this.brokenFlag;
  }

  /**
   * Runs `method` on every event of the batch in the engine (one crossing, plus one per field the
   * plugin reads). Outcomes come back for events that did not come back unchanged; an event that
   * ran out of CPU time, or whose promise did not settle within the wall time, is a `timeout`.
   */
  async runBatch(method: string, mode: BatchMode, batch: SandboxBatch): Promise<BatchOutcome[]> {
    this.check(method);
    const n = batch.events.length;
    if (n === 0) return [];
    const id = ++this.batchSeq;
    this.batches.set(id, batch);
    const timeouts = new Map<number, string>();
    try {
      const cpu = `ran for more than ${this.limits.cpuMs} ms of CPU time`;
      const mostTimeouts = this.limits.batchTimeouts || Infinity;
      for (let start = 0; ; ) {
        const result = this.callApi(this.api.run, [method, mode, id, n, start]);
        if (result.ok) break;
        if (!isInterrupt(result.error)) {
          // The engine itself failed (its heap is full: even an exception cannot be made; Node's
          // stack overflowed under it): every event of the batch failed, and the engine is of no
          // further use.
          const e = result.error.message === 'null' || isOutOfMemory(result.error) ? { name: 'InternalError', message: 'out of memory' } : result.error;
          return this.breakOn(n, e);
        }
        const at = this.number(this.api.progress, []);
        // Blamed only when it had the whole budget to itself; otherwise it runs again from there.
        if (at === start) {
          timeouts.set(at, cpu);
          start = at + 1;
        } else {
          start = at === -1 ? n : at;
        }
        if (timeouts.size >= mostTimeouts) {
          for (let i = start; i < n; i++) timeouts.set(i, `was not run: the plugin ran out of CPU time on ${timeouts.size} events of this batch`);
          break;
        }
        // Each call holds the event loop for at most the CPU limit: other work runs between them.
        if (start < n) await yieldToLoop();
      }
      let text: string;
      try {
        // The indexes come from the plugin's realm (it can replace what lists them): only the batch's count.
        const inBatch = (i: number) => Number.isInteger(i) && i >= 0 && i < n;
        await this.settle(() => this.pendingOf(id), (indexes, why) => indexes.filter(inBatch).forEach((i) => timeouts.set(i, why)));
        text = this.string(this.api.collect, [id]);
      } catch (err) {
        // The heap filled up while the batch ran, and only reading its results met it: the
        // prelude's own calls fail for nothing else (the error itself may not be made whole).
        if (err instanceof SandboxError && (err.code === 'out_of_memory' || err.code === 'broken')) return this.breakOn(n, { name: 'InternalError', message: 'out of memory' });
        throw err;
      }
      const outcomes = new Map<number, BatchOutcome>();
      // The prelude that writes results shares the plugin's realm (a plugin can replace what it
      // calls), so an index is trusted only inside the batch.
      const own = (index: number) => (index >= 0 && index < n ? eventTexts(batch)[index] : undefined);
      for (const o of decodeResults(text, n, own)) if (Number.isInteger(o.index) && o.index >= 0 && o.index < n) outcomes.set(o.index, o);
      for (const [index, message] of timeouts) outcomes.set(index, { kind: 'timeout', index, message });
      return [...outcomes.values()].sort((a, b) => a.index - b.index);
    } finally {
      this.batches.delete(id);
    }
  }

  /**
   * Calls `method(...args, meta)` (setupPlugin, teardownPlugin, runEvery*, `job:<name>`) and
   * waits for it within the limits; resolves to what it returned (JSON), throws SandboxError.
   */
  async call(method: string, args: unknown[] = []): Promise<unknown> {
    this.check(method);
    const result = this.callApi(this.api.call, [method, JSON.stringify(args)], true);
    if (!result.ok) {
      if (this.brokenFlag) throw new SandboxError('broken', `the plugin's engine failed: ${result.error.name}: ${result.error.message}`);
      if (isInterrupt(result.error)) throw new SandboxError('timeout', `${method} ran for more than ${this.limits.cpuMs} ms of CPU time`);
      if (isOutOfMemory(result.error)) throw new SandboxError('out_of_memory', `${method} ran out of memory`);
      throw new SandboxError('threw', `${result.error.name}: ${result.error.message}`, result.error.name);
    }
    const promise = result.handle;
    try {
      let failure: SandboxError | undefined;
      await this.settle(
        () => (this.isPending(promise) ? [0] : []),
        (_indexes, why) => (failure = new SandboxError('timeout', `${method} ${why}`)),
      );
      if (failure) throw failure;
      const state = this.vm.getPromiseState(promise);
      if (state.type === 'fulfilled') {
        const text = state.value.consume((v) => this.vm.getString(v));
        return JSON.parse(text) as unknown;
      }
      if (state.type === 'rejected') {
        const e = errorText(state.error.consume((h) => this.vm.dump(h) as unknown));
        if (isOutOfMemory(e)) throw new SandboxError('out_of_memory', `${method} ran out of memory`);
        throw new SandboxError('threw', `${e.name}: ${e.message}`, e.name);
      }
      throw new SandboxError('timeout', `${method} did not finish`);
    } finally {
      promise.dispose();
    }
  }

  /** Frees the engine. Idempotent; later calls throw SandboxError disposed. */
  dispose(): void {
    if (this.disposedFlag) return;
    this.disposedFlag = true;
    // A broken engine is not freed handle by handle (QuickJS would abort on what it left): its
    // memory is its WebAssembly instance's, gone with it.
    if (this.brokenFlag) return;
    try {
      for (const d of this.deferreds) d.dispose();
      this.deferreds.clear();
      for (const h of Object.values(this.api)) h.dispose();
      this.vm.dispose();
      this.rt.dispose();
    } catch {
      // An engine in a broken state is discarded whole: its memory is its WebAssembly instance's.
    }
  }

  // --- internals ----------------------------------------------------------------------------------

  private check(method: string): void {
    if (this.disposedFlag) throw new SandboxError('disposed', 'the plugin instance was stopped');
    if (!this.methods.has(method)) throw new SandboxError('missing_method', `the plugin does not export ${method}`);
  }

  /** Calls a prelude function with a fresh CPU deadline. */
  private callApi(
    fn: QuickJSHandle,
    args: Array<string | number>,
    keep = false,
  ): { ok: true; handle: QuickJSHandle } | { ok: false; error: { name: string; message: string } } {
    if (this.brokenFlag) return { ok: false, error: { name: 'InternalError', message: 'the engine failed before' } };
    const handles = args.map((a) => (typeof a === 'number' ? this.vm.newNumber(a) : this.vm.newString(a)));
    this.deadline = performance.now() + this.limits.cpuMs;
    try {
      let result: ReturnType<QuickJSContext['callFunction']>;
      try {
        result = this.vm.callFunction(fn, this.vm.undefined, ...handles);
      } catch (err) {
        return { ok: false, error: this.hostFailure(err) };
      }
      if (result.error) {
        const e = errorText(result.error.consume((h) => this.vm.dump(h) as unknown));
        return { ok: false, error: e };
      }
      if (!keep) {
        result.value.dispose();
        return { ok: true, handle: this.vm.undefined };
      }
      return { ok: true, handle: result.value };
    } finally {
      this.deadline = 0;
      for (const h of handles) h.dispose();
    }
  }

  /** Whether the promise is pending; the value or error a settled one hands out is freed. */
  private isPending(promise: QuickJSHandle): boolean {
    const state = this.vm.getPromiseState(promise);
    if (state.type === 'rejected') state.error.dispose();
    else if (state.type === 'fulfilled' && !state.notAPromise) state.value.dispose();
    return state.type === 'pending';
  }

  private number(fn: QuickJSHandle, args: Array<string | number>): number {
    const r = this.callApi(fn, args, true);
    if (!r.ok) this.fail(r.error);
    return r.handle.consume((h) => this.vm.getNumber(h));
  }

  private string(fn: QuickJSHandle, args: Array<string | number>): string {
    const r = this.callApi(fn, args, true);
    if (!r.ok) this.fail(r.error);
    return r.handle.consume((h) => this.vm.getString(h));
  }

  private pendingOf(id: number): number[] {
    const text = this.string(this.api.pending, [id]);
    return text === '' ? [] : text.split(',').map(Number);
  }

  /** Every event of the batch failed with `e`, and the engine is of no further use. */
  private breakOn(n: number, e: { name: string; message: string }): BatchOutcome[] {
    this.brokenFlag = true;
    return Array.from({ length: n }, (_, index): BatchOutcome => ({ kind: 'error', index, name: e.name, message: e.message }));
  }

  private fail(e: { name: string; message: string }): never {
    if (this.brokenFlag) throw new SandboxError('broken', `the plugin's engine failed: ${e.name}: ${e.message}`);
    // 'null': an exception the engine had no memory left to make.
    if (isOutOfMemory(e) || e.message === 'null') throw new SandboxError('out_of_memory', 'the plugin ran out of memory');
    if (isInterrupt(e)) throw new SandboxError('timeout', `ran for more than ${this.limits.cpuMs} ms of CPU time`);
    throw new SandboxError('broken', `the plugin's engine failed: ${e.name}: ${e.message}`);
  }

  /**
   * What the host itself threw from inside the engine (Node's stack overflowed under QuickJS's
   * frames: its own limit counts only part of what they use): the engine's state is unknown, so it
   * is broken — replaced, never called again.
   */
  private hostFailure(err: unknown): { name: string; message: string } {
    this.brokenFlag = true;
    const overflow = err instanceof RangeError && /call stack/i.test(err.message);
    return { name: 'InternalError', message: overflow ? 'stack overflow' : `the engine failed: ${err instanceof Error ? err.message : String(err)}` };
  }

  /** Runs the engine's jobs with a CPU deadline; false when the deadline interrupted them. */
  private drainJobs(): boolean {
    this.deadline = performance.now() + this.limits.cpuMs;
    try {
      for (;;) {
        let result: ReturnType<QuickJSRuntime['executePendingJobs']>;
        try {
          result = this.rt.executePendingJobs();
        } catch (err) {
          const e = this.hostFailure(err);
          throw new SandboxError('broken', `the plugin's engine failed: ${e.name}: ${e.message}`);
        }
        if (result.error) {
          const e = errorText(result.error.consume((h) => this.vm.dump(h) as unknown));
          if (isInterrupt(e)) return false;
          // Any other error belongs to a job whose promise records it (rejected): go on.
          continue;
        }
        if (result.value === 0) return true;
      }
    } finally {
      this.deadline = 0;
    }
  }

  /**
   * Drives what the engine awaits: runs its jobs, and while `pending()` names anything, waits for
   * a host call to settle (fetch, storage, cache) and runs the jobs again, until nothing is pending
   * or the wall time runs out; `timedOut` is told what is still pending then, and why.
   */
  private async settle(pending: () => number[], timedOut: (indexes: number[], why: string) => void): Promise<void> {
    const wallEnd = performance.now() + this.limits.wallMs;
    for (;;) {
      if (!this.drainJobs()) {
        timedOut(pending(), `ran for more than ${this.limits.cpuMs} ms of CPU time`);
        return;
      }
      const still = pending();
      if (still.length === 0) return;
      if (this.opsInFlight === 0) {
        timedOut(still, 'awaited a promise that can never settle');
        return;
      }
      const left = wallEnd - performance.now();
      if (left <= 0) {
        timedOut(still, `did not finish within ${this.limits.wallMs} ms`);
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      let wake: () => void = () => undefined;
      await new Promise<void>((resolve) => {
        wake = resolve;
        this.opWaiters.add(resolve);
        timer = setTimeout(resolve, left);
      });
      this.opWaiters.delete(wake);
      clearTimeout(timer);
    }
  }

  /** The engine's `call(op, args)`: a promise the host settles when its work is done. */
  private hostCall(host: SandboxHost, op: string, args: string): QuickJSHandle {
    const deferred = this.vm.newPromise();
    this.deferreds.add(deferred);
    this.opsInFlight++;
    let parsed: unknown;
    try {
      parsed = JSON.parse(args) as unknown;
    } catch {
      parsed = null;
    }
    // A plugin that starts fetches or storage calls without awaiting them would hold sockets and
    // database connections without bound, starving every other project's plugins: past the cap a
    // call fails at once, in the plugin, where it can be seen.
    const work =
      this.opsInFlight > MAX_HOST_CALLS_IN_FLIGHT
        ? Promise.reject(new Error(`${op}: more than ${MAX_HOST_CALLS_IN_FLIGHT} fetch, storage and cache calls awaited at once by this plugin`))
        : host.call(op, parsed);
    work.then(
      (value) => {
        if (this.disposedFlag) return;
        this.vm.newString(JSON.stringify(value ?? null)).consume((h) => deferred.resolve(h));
      },
      (err: unknown) => {
        if (this.disposedFlag) return;
        const e = err instanceof Error ? { name: err.name, message: err.message } : { name: 'Error', message: String(err) };
        this.vm.newError(e).consume((h) => deferred.reject(h));
      },
    ).finally(() => {
      this.opsInFlight--;
      if (!this.disposedFlag) {
        this.deferreds.delete(deferred);
        deferred.dispose();
      }
      // Any of them may be waiting on this call (a batch's promise chains across them): all look again.
      for (const wake of this.opWaiters) wake();
      this.opWaiters.clear();
    }).catch(() => undefined);
    return deferred.handle;
  }
}
