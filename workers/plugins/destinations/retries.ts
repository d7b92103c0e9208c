// How a destination's batch is tried until each event is delivered or given up: an attempt
// reports the events that failed and whether trying again may help; those are tried again after
// PLUGIN_DELIVERY_BACKOFF (doubled each time, at most MAX_BACKOFF_MS), up to
// PLUGIN_DELIVERY_ATTEMPTS attempts in all; then each is given up, with an ERROR in the config's
// logs naming it and why. One WARN per batch and attempt says what is tried again.
import { setTimeout as sleep } from 'node:timers/promises';
import type { PluginInstance } from '../instance.js';
import type { SandboxEvent } from '../sandbox/index.js';
import type { HeldMetrics } from '../held-metrics.js';
import { exponentialBackoff } from '../../../lib/index.js';

export type FailureReason = 'error' | 'timeout' | 'status' | 'network' | 'refused' | 'invalid';

export interface Failure {
  reason: FailureReason;
  /** What the log line says happened, e.g. `threw RetryError: later`. */
  message: string;
  /** Worth trying again (a refused or invalid webhook, a 4xx answer, is not). */
  retry: boolean;
}

export interface RetrySettings {
  attempts: number;
  backoffMs: number;
}

const MAX_BACKOFF_MS = 60_000;

export type DestinationMethod = 'onEvent' | 'composeWebhook';

/** `event <uuid> ("<name>")`, as log lines name an event. */
export function describeEvent(event: SandboxEvent): string {
  const e = event as { uuid?: unknown; event?: unknown };
  return `event ${String(e.uuid)} (${JSON.stringify(String(e.event)).slice(0, 200)})`;
}

export function backoffMs(settings: RetrySettings, attempt: number): number {
  return exponentialBackoff(settings.backoffMs, attempt - 1, MAX_BACKOFF_MS);
}

/**
 * Tries `attempt` on the events (indexes into `events`) until none fails or the attempts run out.
 * Resolves once every event is delivered or given up; rejects only when `signal` aborts.
 */
export async function withRetries(
  method: DestinationMethod,
  events: readonly SandboxEvent[],
  attempt: (indexes: readonly number[]) => Promise<Map<number, Failure>>,
  ctx: { instance: PluginInstance; metrics: HeldMetrics; settings: RetrySettings; signal: AbortSignal },
): Promise<void> {
  let pending: number[] = events.map((_, i) => i);
  for (let n = 1; ; n++) {
    ctx.signal.throwIfAborted();
    const failures = await attempt(pending);
    const again: number[] = [];
    const last = n >= ctx.settings.attempts;
    for (const [index, failure] of failures) {
      if (failure.retry && !last) again.push(index);
      else giveUp(method, events[index]!, failure, n, ctx);
    }
    if (again.length === 0) return;
    again.sort((a, b) => a - b);
    const wait = backoffMs(ctx.settings, n);
    const first = failures.get(again[0]!)!;
    ctx.instance.log(
      'SYSTEM',
      'WARN',
      `${method} failed on ${again.length} of ${pending.length} event${pending.length === 1 ? '' : 's'} (${describeEvent(events[again[0]!]!)}: ${first.message}): trying again in ${wait / 1000} s (attempt ${n + 1} of ${ctx.settings.attempts})`,
    );
    ctx.metrics.retries.inc({ method }, again.length);
    await sleep(wait, undefined, { signal: ctx.signal });
    pending = again;
  }
}

function giveUp(method: DestinationMethod, event: SandboxEvent, failure: Failure, attempts: number, ctx: { instance: PluginInstance; metrics: HeldMetrics }): void {
  ctx.metrics.failed.inc({ method, reason: failure.reason });
  const tries = failure.retry ? ` after ${attempts} attempt${attempts === 1 ? '' : 's'}` : '';
  ctx.instance.log('PLUGIN', 'ERROR', `${method} ${failure.message} on ${describeEvent(event)}${tries}: the event is skipped`);
}
