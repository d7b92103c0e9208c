// Scenario: latency percentiles at a constant offered rate (autocannon -R), at fractions of the
// maximum measured in the same run — how an unsaturated node answers, not just how fast it can go.
import { runLoad } from '../lib/load.js';

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
  url: string;
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
    const r = await runLoad({ url: o.url, body: o.body, eventsPerRequest: o.eventsPerRequest, connections: o.connections, durationS: o.durationS, overallRate: offered });
    points.push({ fraction, offeredReqPerSec: offered, achievedReqPerSec: r.reqPerSec, eventsPerSec: r.eventsPerSec, p50: r.p50, p90: r.p90, p99: r.p99, p999: r.p999, errors: r.errors + r.non2xx });
  }
  return points;
}
