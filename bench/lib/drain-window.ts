// Throughput over a window of a backlog's drain, from samples of progress and CPU time: leaves out
// a cold start and the tail, where the figures describe warming up and idling, not capacity.
import type { machineCpuSeconds } from './processes.js';

export interface DrainSample {
  /** performance.now() when taken. */
  t: number;
  processed: number;
  cpu: { worker: number; postgres: number; nats: number };
  machine: ReturnType<typeof machineCpuSeconds>;
}

/** Rate and CPU per event of a stretch of a drain. */
export interface DrainFigures {
  events: number;
  seconds: number;
  eventsPerSecond: number;
  cpu: { workerUsPerEvent: number; postgresUsPerEvent: number; natsUsPerEvent: number };
  workerCoreBoundEventsPerSecond: number;
  twoCoreBoundEventsPerSecond: number;
}

export interface DrainWindow extends DrainFigures {
  /** Share of the backlog processed at the window's start and end. */
  from: number;
  to: number;
  /** Shares of the machine's CPU time (all cores) in the window: busy (anything, ours or not), and idle waiting for disk I/O. */
  machine: { busy: number; iowait: number };
}

/**
 * `events` processed in `seconds` with the CPU seconds each process used meanwhile, and what that
 * CPU per event allows: one worker process runs on one core; all three share two.
 */
export function drainFigures(events: number, seconds: number, used: DrainSample['cpu']): DrainFigures {
  const perEvent = (s: number) => Math.round((s / events) * 1e6 * 10) / 10;
  const cpu = { workerUsPerEvent: perEvent(used.worker), postgresUsPerEvent: perEvent(used.postgres), natsUsPerEvent: perEvent(used.nats) };
  return {
    events,
    seconds,
    eventsPerSecond: Math.round(events / seconds),
    cpu,
    workerCoreBoundEventsPerSecond: Math.round(1e6 / Math.max(1, cpu.workerUsPerEvent)),
    twoCoreBoundEventsPerSecond: Math.round(2e6 / Math.max(1, cpu.workerUsPerEvent + cpu.postgresUsPerEvent + cpu.natsUsPerEvent)),
  };
}

/**
 * Rate and CPU per event from the last sample before `from` of the backlog was processed to the
 * first at which `to` was: leaves out the cold start (JIT, heap growth, persons loaded into the
 * cache) and the tail, where shards finish one by one and the worker idles.
 */
export function drainWindow(samples: readonly DrainSample[], total: number, from: number, to: number): DrainWindow {
  const start = samples.findLast((s) => s.processed <= from * total);
  const end = samples.find((s) => s.processed >= to * total);
  if (!start || !end || end.processed <= start.processed) throw new Error(`the drain was not sampled between ${from} and ${to} of the backlog`);
  const used = { worker: end.cpu.worker - start.cpu.worker, postgres: end.cpu.postgres - start.cpu.postgres, nats: end.cpu.nats - start.cpu.nats };
  const machineSeconds = (k: keyof DrainSample['machine']) => end.machine[k] - start.machine[k];
  const machineTotal = machineSeconds('busy') + machineSeconds('idle') + machineSeconds('iowait');
  return {
    from: start.processed / total,
    to: end.processed / total,
    ...drainFigures(end.processed - start.processed, (end.t - start.t) / 1000, used),
    machine: {
      busy: Math.round((machineSeconds('busy') / machineTotal) * 100) / 100,
      iowait: Math.round((machineSeconds('iowait') / machineTotal) * 100) / 100,
    },
  };
}

