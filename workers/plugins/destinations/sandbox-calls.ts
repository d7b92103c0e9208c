// A destination method run on a batch's events in the config's sandbox: in slices whose size
// adapts so that one call keeps the worker's event loop for about SLICE_MS (a plugin that spends
// 50 ms of CPU per event, under its limit, must not hold the persons role for a whole batch), each
// slice started as soon as the one before has left the event loop (their awaits overlap). While
// the instance is not ready (being set up, replaced, or disabled) the call waits for it.
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../../lib/index.js';
import { errorText } from '../../coordination/index.js';
import type { PluginInstance } from '../instance.js';
import type { BatchMode, BatchOutcome, SandboxEvent } from '../sandbox/index.js';

/** Target time of one sandbox call on the event loop. */
const SLICE_MS = 20;
const NOT_READY_WAIT_MS = 1_000;

export class SandboxCalls {
  private sliceEvents: number;

  constructor(
    private readonly instance: PluginInstance,
    private readonly maxEvents: number,
    private readonly logger: Logger,
  ) {
    this.sliceEvents = maxEvents;
  }

  /** Outcomes of `method` on `events` (indexes into `events`); none for an event that went well. */
  async run(method: 'onEvent' | 'composeWebhook', mode: BatchMode, teamId: number, events: readonly SandboxEvent[], signal: AbortSignal): Promise<BatchOutcome[]> {
    const calls: Array<Promise<BatchOutcome[]>> = [];
    for (let start = 0; start < events.length; ) {
      const size = Math.max(1, Math.min(this.sliceEvents, events.length - start));
      const from = start;
      calls.push(this.runSlice(method, mode, teamId, events.slice(from, from + size), signal).then((outcomes) => outcomes.map((o) => ({ ...o, index: o.index + from }))));
      start += size;
      if (start < events.length) await yieldToLoop();
    }
    return (await Promise.all(calls)).flat();
  }

  private adapt(ms: number, size: number): void {
    if (ms > SLICE_MS && size > 1) this.sliceEvents = Math.max(1, Math.floor(size / 2));
    else if (ms < SLICE_MS / 4 && size === this.sliceEvents) this.sliceEvents = Math.min(this.maxEvents, size * 2);
  }

  private async runSlice(method: string, mode: BatchMode, teamId: number, events: SandboxEvent[], signal: AbortSignal): Promise<BatchOutcome[]> {
    for (;;) {
      signal.throwIfAborted();
      if (this.instance.state === 'ready' || (await this.instance.ready())) {
        try {
          const began = performance.now();
          const call = this.instance.runBatch(method, mode, { teamId, events });
          // The engine ran every event of the slice before the call first awaits: that is the
          // time the event loop was held.
          this.adapt(performance.now() - began, events.length);
          const outcomes = await call;
          if (outcomes) return outcomes;
        } catch (err) {
          // The runtime failed on the slice: its own failure, or one the plugin provoked (it shares
          // the prelude's realm and can forge the result string, e.g. by replacing
          // Array.prototype.join). Each event failed: the breaker counts it, it is tried again, and
          // the config's logs say so (retries.ts: a WARN per attempt, an ERROR per event given up).
          this.logger.warn({ err: errorText(err), configId: this.instance.configId, method }, 'running a destination method failed');
          return events.map((_, index) => ({ kind: 'error', index, name: 'Error', message: `the plugin runtime failed: ${errorText(err)}` }));
        }
      }
      // Being set up (again), or given up: its events wait (the runner starts over when the config changes).
      await sleep(NOT_READY_WAIT_MS, undefined, { signal });
    }
  }
}
