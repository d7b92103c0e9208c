// Hooks that see a batch's events inside the persons role before person processing: where
// transformations plug in (the plugin runtime registers one; the persons role runs them). A hook
// may change or drop events; what it leaves is what persons are computed from and what PROCESSED
// holds. Hooks run again whenever a batch is (retries, replays after a crash, the trials that
// isolate a poison event): the same input must give the same result, with no side effect that
// matters.
import type { CapturedEvent } from '../../lib/index.js';

/** An event as a hook sees it. */
export interface HookedEvent {
  readonly projectId: number;
  readonly event: Readonly<CapturedEvent>;
}

export interface HookBatch {
  readonly stream: string;
  readonly shard: number;
  /** The batch's events in stream order, as the hooks before this one left them. */
  readonly events: readonly HookedEvent[];
  /**
   * Replaces event `index`: persons and PROCESSED see `event` instead (the hook's no more: keep it
   * unchanged after the call). Throws, the event left as it was, when it is not a captured event,
   * or HookedEventTooLargeError when its line would not fit a PROCESSED message.
   */
  replace(index: number, event: CapturedEvent): void;
  /** Drops event `index`: nothing of it reaches persons or PROCESSED. */
  drop(index: number): void;
  /**
   * Adds properties to event `index` (as replace with them merged into its properties would, and
   * cheaper: keys it does not have are written into its line's bytes, the event is not serialised
   * again). Keep the object unchanged after the call; passing the same object for many events lets
   * its JSON be made once. Throws like replace (HookedEventTooLargeError), the event left as it was.
   */
  addProperties(index: number, properties: Readonly<Record<string, unknown>>): void;
}

/**
 * An event a hook changed (replace, addProperties) whose line would not fit a PROCESSED message:
 * refused, the event stays as it was. `bytes`: its line as JSON; `room`: the most a line may take.
 */
export class HookedEventTooLargeError extends Error {
  override name = 'HookedEventTooLargeError';
  readonly code = 'hooked_event_too_large';

  constructor(
    readonly uuid: string,
    readonly bytes: number,
    readonly room: number,
  ) {
    super(`event ${uuid} would be ${bytes} bytes as JSON, more than the ${room} a PROCESSED line may take`);
  }
}

export type BeforePersonsHook = (batch: HookBatch) => void | Promise<void>;

export class EventHooks {
  private readonly hooks: { name: string; run: BeforePersonsHook }[] = [];

  /** Adds a hook after the ones added before it; returns a function that removes it. */
  add(name: string, run: BeforePersonsHook): () => void {
    const entry = { name, run };
    this.hooks.push(entry);
    return () => {
      const at = this.hooks.indexOf(entry);
      if (at !== -1) this.hooks.splice(at, 1);
    };
  }

  get size(): number {
    return this.hooks.length;
  }

  /**
   * Runs every hook in the order added over `events`; each sees what the ones before it changed
   * and dropped. `replaced` is told of each replacement and `added` of added properties (before
   * the next hook runs; by default added properties are a replacement). Returns the events left,
   * in order.
   */
  async run<T extends { projectId: number; event: CapturedEvent }>(
    where: { stream: string; shard: number },
    events: readonly T[],
    replaced: (entry: T, event: CapturedEvent, hook: string) => void,
    added: (entry: T, properties: Readonly<Record<string, unknown>>, hook: string) => void = (entry, properties, hook) =>
      replaced(entry, { ...entry.event, properties: { ...entry.event.properties, ...properties } }, hook),
  ): Promise<T[]> {
    let live = [...events];
    for (const { name, run } of this.hooks) {
      if (live.length === 0) break;
      const current = live;
      const dropped = new Set<number>();
      const check = (index: number) => {
        if (!Number.isInteger(index) || index < 0 || index >= current.length) throw new RangeError(`hook ${name}: no event ${index} in this batch`);
      };
      await run({
        stream: where.stream,
        shard: where.shard,
        events: current,
        replace: (index, event) => {
          check(index);
          replaced(current[index]!, event, name);
        },
        drop: (index) => {
          check(index);
          dropped.add(index);
        },
        addProperties: (index, properties) => {
          check(index);
          added(current[index]!, properties, name);
        },
      });
      if (dropped.size > 0) live = current.filter((_, i) => !dropped.has(i));
    }
    return live;
  }
}
