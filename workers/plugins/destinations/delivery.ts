// One destination config's delivery on the worker holding its lease (docs/plugins.md,
// "Destinations"): the project's processed events read from PROCESSED after the config's
// position, cut into batches (one sandbox call each, or a few when the plugin is slow), each
// batch delivered until every event is delivered or given up (retries.ts), the position moved on
// in PostgreSQL after each batch, in order. Up to WINDOW batches are in flight at once, so the
// sandbox composes the next batch while the requests of the one before are answered.
//
// At least once: the position moves only once its batch is done. A worker that stops outright
// after delivering a batch and before recording it has its successor deliver that batch again
// (the events of at most WINDOW batches); a clean stop finishes the batches in flight first.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../../lib/index.js';
import { errorText, OwnershipLostError } from '../../coordination/index.js';
import type { HolderState } from '../holder-state.js';
import type { PluginInstance } from '../instance.js';
import type { SandboxEvent } from '../sandbox/index.js';
import type { HeldMetrics } from '../held-metrics.js';
import { onEventAttempt } from './on-event.js';
import type { FeedMessage, ProcessedFeed } from './processed-feed.js';
import { withRetries, type RetrySettings } from './retries.js';
import { SandboxCalls } from './sandbox-calls.js';
import { webhookAttempt, type WebhookSender } from './webhooks.js';

export interface DeliverySettings extends RetrySettings {
  /** Most events in one batch (one sandbox call while the plugin is quick). */
  batchEvents: number;
  /** Batches in flight at once. */
  window: number;
}

export interface DeliveryDeps {
  instance: PluginInstance;
  state: HolderState;
  feed: ProcessedFeed;
  /** Lines of the first message already delivered (a batch ended inside it). */
  skipLines: { seq: number; lines: number } | undefined;
  sender: WebhookSender;
  metrics: HeldMetrics;
  settings: DeliverySettings;
  logger: Logger;
  /** False when this worker may no longer act for the config (its lease is past its deadline). */
  mayAct(): boolean;
  /** The config's lease is gone (another worker holds it): stop. */
  lost(reason: string): void;
}

interface Batch {
  events: SandboxEvent[];
  /** Where delivery stands once it is done: after message `seq`, and `lines` events of the next one. */
  seq: number;
  lines: number;
  /** When PROCESSED stored its first message. */
  firstTimeMs: number;
  done: boolean;
}

export interface Delivery {
  /** Messages past what is delivered, and the age of the oldest event not delivered. */
  lag(): { messages: number; seconds: number };
  stop(): Promise<void>;
}

const COMMIT_RETRY_MS = 1_000;
const MAY_ACT_WAIT_MS = 200;

export function startDelivery(deps: DeliveryDeps): Delivery {
  const { instance, state, metrics, settings, logger } = deps;
  const abort = new AbortController();
  const signal = abort.signal;
  const calls = new SandboxCalls(instance, settings.batchEvents, logger);
  const onEvent = instance.has('onEvent');
  const composeWebhook = instance.has('composeWebhook');
  const inFlight: Batch[] = [];
  const delivering = new Set<Promise<void>>();
  let gathering: Batch | undefined;
  let freed: (() => void) | undefined;
  let committing = Promise.resolve();
  let pendingMessages = 0;
  let oldestUndelivered: number | undefined;

  const deliver = async (batch: Batch) => {
    const teamId = state.teamId;
    const ctx = { instance, metrics, settings, signal };
    const work: Array<Promise<void>> = [];
    if (composeWebhook) work.push(withRetries('composeWebhook', batch.events, webhookAttempt(instance, calls, deps.sender, teamId, batch.events, metrics, signal), ctx));
    if (onEvent) work.push(withRetries('onEvent', batch.events, onEventAttempt(instance, calls, teamId, batch.events, metrics, signal), ctx));
    await Promise.all(work);
  };

  /**
   * Records the position of the batches done at the head of the window, in order. They leave the
   * window once recorded: what a worker stopped outright delivers again is at most the window.
   */
  const commitDone = async () => {
    let done = 0;
    while (inFlight[done]?.done) done++;
    if (done === 0) return;
    const last = inFlight[done - 1]!;
    for (;;) {
      try {
        await state.commitDelivery(last.seq, last.lines);
        break;
      } catch (err) {
        if (err instanceof OwnershipLostError) {
          deps.lost(err.message);
          abort.abort();
          return;
        }
        if (signal.aborted) return;
        logger.warn({ err: errorText(err), configId: state.configId }, 'recording the delivery position failed: trying again');
        await sleep(COMMIT_RETRY_MS);
      }
    }
    inFlight.splice(0, done);
    oldestUndelivered = inFlight[0]?.firstTimeMs;
    freed?.();
  };

  /**
   * Delivers the batch; a failure that escapes delivering it is retried, not skipped. What a
   * plugin can provoke (a throw, a forged result string that makes the runtime fail) is each
   * event's failure inside `deliver` (sandbox-calls.ts, retries.ts); what reaches here is the
   * runtime's own, told in the config's logs too, on the 1st, 2nd, 4th, 8th … try (never a flood).
   */
  const deliverSurely = async (batch: Batch) => {
    for (let tries = 1; ; tries++) {
      try {
        return await deliver(batch);
      } catch (err) {
        if (signal.aborted) throw err;
        logger.error({ err: errorText(err), configId: state.configId }, 'delivering a batch failed: trying again');
        if ((tries & (tries - 1)) === 0) {
          const n = batch.events.length;
          instance.log('SYSTEM', 'ERROR', `Delivering a batch of ${n} event${n === 1 ? '' : 's'} failed (try ${tries}): ${errorText(err)}. Trying again in ${COMMIT_RETRY_MS / 1000} s.`);
        }
        await sleep(COMMIT_RETRY_MS, undefined, { signal });
      }
    }
  };

  const dispatch = (batch: Batch) => {
    inFlight.push(batch);
    oldestUndelivered ??= batch.firstTimeMs;
    const delivered = deliverSurely(batch).then(
      () => {
        batch.done = true;
        committing = committing.then(commitDone);
      },
      () => {
        // Only a stop ends a batch early: the next holder delivers it again.
      },
    );
    delivering.add(delivered);
    void delivered.finally(() => delivering.delete(delivered));
  };

  const waitForRoom = async () => {
    while (inFlight.length >= settings.window && !signal.aborted) await new Promise<void>((resolve) => (freed = resolve));
    while (!deps.mayAct() && !signal.aborted) await sleep(MAY_ACT_WAIT_MS);
  };

  const loop = async () => {
    const flush = async () => {
      if (!gathering || gathering.events.length === 0) return;
      await waitForRoom();
      if (signal.aborted) return;
      dispatch(gathering);
      gathering = undefined;
    };
    for await (const msg of deps.feed.messages(signal)) {
      pendingMessages = msg.pending;
      const skip = deps.skipLines && msg.seq === deps.skipLines.seq ? deps.skipLines.lines : 0;
      for (const { event, line } of parseLines(msg, skip, logger)) {
        gathering ??= { events: [], seq: msg.seq - 1, lines: line, firstTimeMs: msg.timeMs, done: false };
        gathering.events.push(event);
        // Ends inside the message: its next holder skips the lines delivered.
        gathering.seq = msg.seq - 1;
        gathering.lines = line + 1;
        if (gathering.events.length >= settings.batchEvents) await flush();
        if (signal.aborted) return;
      }
      if (gathering) {
        gathering.seq = msg.seq;
        gathering.lines = 0;
      }
      // Caught up: deliver what is gathered now rather than wait for more.
      if (msg.pending === 0) await flush();
    }
  };

  const running = loop().catch((err: unknown) => {
    if (!signal.aborted) logger.error({ err: errorText(err), configId: state.configId }, 'destination delivery stopped');
  });

  return {
    lag: () => ({
      messages: pendingMessages + new Set(inFlight.map((b) => b.seq)).size,
      seconds: Math.max(0, (Date.now() - (oldestUndelivered ?? gathering?.firstTimeMs ?? Date.now())) / 1000),
    }),
    async stop() {
      // Batches whose requests are in flight finish and are recorded; retries waiting are cut short.
      abort.abort();
      freed?.();
      await running;
      await Promise.allSettled([...delivering]);
      await committing;
    },
  };
}

/** The message's events after its first `skip` lines, each with its line number. */
function parseLines(msg: FeedMessage, skip: number, logger: Logger): Array<{ event: SandboxEvent; line: number }> {
  const events: Array<{ event: SandboxEvent; line: number }> = [];
  for (let i = skip; i < msg.lines.length; i++) {
    try {
      const event = JSON.parse(msg.lines[i]!) as SandboxEvent;
      if (typeof event === 'object' && event !== null && typeof event.properties === 'object' && event.properties !== null) events.push({ event, line: i });
      else logger.warn({ seq: msg.seq, line: i }, 'a PROCESSED line that is not an event: not delivered');
    } catch {
      logger.warn({ seq: msg.seq, line: i }, 'a PROCESSED line that is not JSON: not delivered');
    }
  }
  return events;
}
