import { describe, expect, it } from 'vitest';
import { drainWindow, type DrainSample } from './drain-window.js';

/** A sample at `seconds` with `processed` events and the CPU seconds used so far. */
const at = (seconds: number, processed: number, worker: number, postgres = 0, nats = 0, busy = 0, idle = 0): DrainSample => ({
  t: seconds * 1000,
  processed,
  cpu: { worker, postgres, nats },
  machine: { busy, idle, iowait: 0 },
});

describe('bench drain window', () => {
  it('drain window - leaves out a slow cold start and the tail: rate and CPU per event of the middle only', () => {
    const samples = [
      at(0, 0, 0),
      at(10, 100_000, 7, 0, 0, 16, 4), // cold: 70 µs per event
      at(20, 300_000, 11, 2, 1, 36, 4),
      at(30, 700_000, 19, 6, 3, 74, 6),
      at(40, 900_000, 23, 8, 4, 93, 7),
      at(60, 1_000_000, 25, 9, 5, 100, 40), // tail: shards finishing one by one
    ];
    const w = drainWindow(samples, 1_000_000, 0.3, 0.9);
    expect(w).toMatchObject({ from: 0.3, to: 0.9, events: 600_000, seconds: 20, eventsPerSecond: 30_000 });
    expect(w.cpu).toEqual({ workerUsPerEvent: 20, postgresUsPerEvent: 10, natsUsPerEvent: 5 });
    expect(w.workerCoreBoundEventsPerSecond).toBe(50_000);
    expect(w.twoCoreBoundEventsPerSecond).toBe(57_143);
    // 57 busy and 3 idle seconds of CPU between the two samples.
    expect(w.machine).toEqual({ busy: 0.95, iowait: 0 });
  });

  it('drain window - a drain that passes both marks between two samples is measured across them', () => {
    const w = drainWindow([at(0, 0, 0), at(1, 200, 1), at(2, 1_000, 2)], 1_000, 0.3, 0.9);
    expect(w).toMatchObject({ from: 0.2, to: 1, events: 800, seconds: 1 });
  });

  it('drain window - a drain sampled only once cannot be measured: said, not a figure from nothing', () => {
    expect(() => drainWindow([at(0, 1_000, 5)], 1_000, 0.3, 0.9)).toThrow(/not sampled/);
  });
});
