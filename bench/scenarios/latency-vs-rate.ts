// Scenario: latency percentiles at a constant offered rate (open loop, bench/lib/paced-load.ts),
// at fractions of the maximum measured in the same run — how an unsaturated node answers, not
// just how fast it can go.
import { runPaced } from '../lib/paced-load.js';

export interface RatePoint {
  /** Fraction of the measured maximum offered (0.25 = 25%). */
  fraction: number;
  offeredReqPerSec: number;
  achievedReqPerSec: number;
  eventsPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  errors: number;
}

export async function latencyVsRate(o: {
  /** Origin, e.g. http://127.0.0.1:8000. */
  url: string;
  path: string;
  body: string;
  eventsPerRequest: number;
  connections: number;
  durationS: number;
  maxReqPerSec: number;
  fractions: readonly number[];
  log: (m: string) => void;
}): Promise<RatePoint[]> {
  const points: RatePoint[] = [];
  for (const fraction of o.fractions) {
    const offered = Math.max(1, Math.round(o.maxReqPerSec * fraction));
    o.log(`latency at ${Math.round(fraction * 100)}% of max: ${offered} req/s offered`);
    const r = await runPaced({ url: o.url, path: o.path, body: o.body, ratePerSec: offered, durationS: o.durationS, connections: o.connections });
    points.push({ fraction, offeredReqPerSec: offered, achievedReqPerSec: r.achievedPerSec, eventsPerSec: r.achievedPerSec * o.eventsPerRequest, p50: r.p50, p90: r.p90, p99: r.p99, p999: r.p999, errors: r.errors });
  }
  return points;
}
