// Scenario: latency percentiles at a constant offered rate (open loop, bench/lib/paced-load.ts),
// at fractions of the maximum measured in the same run — how an unsaturated node answers, not
// just how fast it can go. The first point is the node unloaded (1% of the maximum, at least
// 10 requests/s): what the other points should be compared with.
import { runPaced } from '../lib/paced-load.js';

export interface RatePoint {
  /** Fraction of the measured maximum offered (0.25 = 25%). */
  fraction: number;
  /** The reference point at a tiny rate. */
  unloaded: boolean;
  offeredReqPerSec: number;
  achievedReqPerSec: number;
  eventsPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  /** How late the generator sent requests (ms, p99): large means the generator lacked CPU. */
  sendLagP99: number;
  busy: number;
  errors: number;
}

export const UNLOADED_FRACTION = 0.01;

export async function latencyVsRate(
  o: {
    /** Origin, e.g. http://127.0.0.1:8000. */
    url: string;
    path: string;
    body: string;
    eventsPerRequest: number;
    connections: number;
    durationS: number;
    warmupS: number;
    maxReqPerSec: number;
    fractions: readonly number[];
    /** Called before each point: the servers should be idle when a point starts. */
    beforePoint?: () => Promise<void>;
    /** Called after each point was added to `into`. */
    onMeasured?: () => void;
    signal?: AbortSignal;
    log: (m: string) => void;
  },
  /** Each point is added here as soon as it is measured. */
  into: RatePoint[] = [],
): Promise<RatePoint[]> {
  const unloadedRate = Math.max(10, Math.round(o.maxReqPerSec * UNLOADED_FRACTION));
  const plan = [{ offered: unloadedRate, unloaded: true }, ...o.fractions.map((f) => ({ offered: Math.max(1, Math.round(o.maxReqPerSec * f)), unloaded: false }))];
  for (const { offered, unloaded } of plan) {
    o.signal?.throwIfAborted();
    await o.beforePoint?.();
    o.signal?.throwIfAborted();
    const fraction = offered / o.maxReqPerSec;
    o.log(`latency ${unloaded ? 'unloaded' : `at ${Math.round(fraction * 100)}% of max`}: ${offered} req/s offered`);
    const r = await runPaced({ url: o.url, path: o.path, body: o.body, ratePerSec: offered, durationS: o.durationS, warmupS: o.warmupS, connections: o.connections, signal: o.signal });
    o.signal?.throwIfAborted(); // a point cut short is not a figure
    into.push({
      fraction,
      unloaded,
      offeredReqPerSec: offered,
      achievedReqPerSec: r.achievedPerSec,
      eventsPerSec: r.achievedPerSec * o.eventsPerRequest,
      p50: r.p50,
      p90: r.p90,
      p99: r.p99,
      p999: r.p999,
      sendLagP99: r.sendLagP99,
      busy: r.busy,
      errors: r.errors,
    });
    o.onMeasured?.();
  }
  return into;
}
