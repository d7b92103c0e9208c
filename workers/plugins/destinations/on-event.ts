// onEvent(event, meta) destinations (docs/plugins.md, "Destinations"): the plugin delivers each
// event itself (usually with fetch). An event whose onEvent threw or ran out of time is tried again
// (retries.ts). The breaker counts what the plugin's code does wrong: a throw, a timeout, but
// not RetryError (the plugin saying its destination is away) nor a fetch the host could not make
// (HostOpError: the destination unreachable), so a destination that is down does not disable it.
import type { PluginInstance } from '../instance.js';
import type { BatchOutcome, SandboxEvent } from '../sandbox/index.js';
import type { HeldMetrics } from '../held-metrics.js';
import type { Failure } from './retries.js';
import type { SandboxCalls } from './sandbox-calls.js';

/** Errors that say the destination is away, not that the plugin is broken. */
const DESTINATION_AWAY = new Set(['RetryError', 'HostOpError']);

/** Records the outcomes of one call in the breaker and returns the failures, by index into `indexes`' events. */
export function sandboxFailures(instance: PluginInstance, outcomes: readonly BatchOutcome[], total: number): Map<number, Failure> {
  const failures = new Map<number, Failure>();
  let failed = 0;
  let timedOut = 0;
  for (const o of outcomes) {
    if (o.kind === 'timeout') {
      timedOut++;
      failures.set(o.index, { reason: 'timeout', message: o.message, retry: true });
    } else if (o.kind === 'error') {
      if (!DESTINATION_AWAY.has(o.name)) failed++;
      failures.set(o.index, { reason: 'error', message: `threw ${o.name}: ${o.message}`, retry: true });
    }
  }
  instance.record(total - failed - timedOut, failed, timedOut);
  return failures;
}

export function onEventAttempt(
  instance: PluginInstance,
  calls: SandboxCalls,
  teamId: number,
  events: readonly SandboxEvent[],
  metrics: HeldMetrics,
  signal: AbortSignal,
): (indexes: readonly number[]) => Promise<Map<number, Failure>> {
  return async (indexes) => {
    const outcomes = await calls.run('onEvent', 'void', teamId, indexes.map((i) => events[i]!), signal);
    const local = sandboxFailures(instance, outcomes, indexes.length);
    metrics.delivered.inc({ method: 'onEvent' }, indexes.length - local.size);
    return new Map([...local].map(([at, failure]) => [indexes[at]!, failure]));
  };
}
