// Scheduled tasks (docs/plugins.md, "Scheduled tasks"): runEveryMinute, runEveryHour and
// runEveryDay of a config, run by the worker holding its lease, once per period aligned in UTC
// (the minute, the hour, the day from 00:00 UTC). Each run's period is recorded before the run
// (and its end after), under the holder's fence, so a new holder neither runs a period again nor
// skips one: it runs the current period at once when its predecessor had not, and waits for the
// next one otherwise. A config's first period is recorded without a run (a task first runs at the
// next boundary, as a cron schedule would); periods missed while no worker held the config (the
// whole cluster stopped) come to one run, not one per period.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../lib/index.js';
import { errorText, OwnershipLostError } from '../coordination/index.js';
import type { HeldMetrics } from './held-metrics.js';
import type { HolderState } from './holder-state.js';
import type { PluginInstance } from './instance.js';

export const TASKS = ['runEveryMinute', 'runEveryHour', 'runEveryDay'] as const;
export type TaskName = (typeof TASKS)[number];

/** The scheduler's clock: tests make periods short to see several in a test's time. */
export interface TaskClock {
  now(): number;
  periodMs: Readonly<Record<TaskName, number>>;
}

export const REAL_TASK_CLOCK: TaskClock = Object.freeze({
  now: () => Date.now(),
  periodMs: Object.freeze({ runEveryMinute: 60_000, runEveryHour: 3_600_000, runEveryDay: 86_400_000 }),
});

/** The start of the period `at` falls in (UTC: the epoch starts a day). */
export function periodStart(at: number, periodMs: number): number {
  return Math.floor(at / periodMs) * periodMs;
}

const RETRY_MS = 1_000;

export interface ScheduledDeps {
  instance: PluginInstance;
  state: HolderState;
  clock: TaskClock;
  metrics: HeldMetrics;
  logger: Logger;
  mayAct(): boolean;
  lost(reason: string): void;
}

/** Runs the tasks the instance exports until stopped; stop() waits for a run in progress. */
export function startScheduledTasks(deps: ScheduledDeps): { stop(): Promise<void> } {
  const abort = new AbortController();
  const tasks = TASKS.filter((t) => deps.instance.has(t));
  const running = Promise.all(tasks.map((task) => runTask(task, deps, abort.signal)));
  return {
    async stop() {
      abort.abort();
      await running;
    },
  };
}

async function runTask(task: TaskName, deps: ScheduledDeps, signal: AbortSignal): Promise<void> {
  const { state, clock, instance, logger } = deps;
  const period = clock.periodMs[task];
  let last: number | undefined;
  while (!signal.aborted) {
    try {
      if (last === undefined) {
        const known = (await state.taskRuns()).get(task);
        const now = periodStart(clock.now(), period);
        if (!known) {
          // First period of this config: recorded, not run.
          await state.claimTask(task, now, false);
          last = now;
        } else {
          if (!known.finished) {
            instance.log('SYSTEM', 'WARN', `${task} of ${new Date(known.slot).toISOString()} was cut short (the worker running it stopped): it is not run again for that period`);
            await state.finishTask(task, known.slot);
          }
          last = known.slot;
        }
      }
      const due = periodStart(clock.now(), period);
      if (due > last) {
        if (!deps.mayAct() || !(await instance.ready())) {
          await sleep(RETRY_MS, undefined, { signal });
          continue;
        }
        if (await state.claimTask(task, due, true)) await runOnce(task, due, deps);
        last = due;
        continue;
      }
      await sleep(Math.max(1, last + period - clock.now()), undefined, { signal });
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof OwnershipLostError) {
        deps.lost(err.message);
        return;
      }
      logger.warn({ err: errorText(err), configId: state.configId, task }, 'scheduled task: trying again');
      last = undefined;
      await sleep(RETRY_MS, undefined, { signal }).catch(() => undefined);
    }
  }
}

async function runOnce(task: TaskName, slot: number, deps: ScheduledDeps): Promise<void> {
  const { instance, state, metrics } = deps;
  try {
    const done = await instance.call(task);
    if (!done) {
      instance.log('SYSTEM', 'WARN', `${task} of ${new Date(slot).toISOString()} did not run: the plugin was being set up again`);
      metrics.tasks.inc({ task, outcome: 'failed' });
    } else {
      instance.record(1, 0, 0);
      metrics.tasks.inc({ task, outcome: 'ok' });
    }
  } catch (err) {
    const timedOut = err instanceof Error && 'code' in err && err.code === 'timeout';
    instance.record(0, timedOut ? 0 : 1, timedOut ? 1 : 0);
    instance.log('PLUGIN', 'ERROR', `${task} failed: ${err instanceof Error ? err.message : String(err)}`);
    metrics.tasks.inc({ task, outcome: 'failed' });
  }
  await state.finishTask(task, slot);
}
