// Per-project capture limits, as the project's spate-projects record carries them (the admin
// server writes the ones that apply): realtime events per second, HISTORICAL messages per
// second, events per UTC day. Each ingest node counts on its own (docs/capture-api.md says why).
//
// The rates are token buckets holding one second's worth, full for a project not seen yet, with
// the spike limiter's debt rule: a request passes while any token is left (> 0) and is charged in
// full, so one request larger than a second's worth still passes once and then holds the project
// back until the refill has paid for it. The sustained rate holds whatever the request sizes; a
// refused request costs nothing. The day's count starts again at 00:00 UTC.
import type { ProjectLimits } from '../../lib/index.js';

/** Which limit a refusal or a drop is for (the `limit` label of the metrics). */
export type ProjectLimitName = 'events_per_second' | 'historical_messages_per_second' | 'events_per_day';

export type LimitDecision =
  | { kind: 'accept' }
  /** Over a rate: answer 429, retry after this many seconds (at least 1). */
  | { kind: 'rate_limited'; limit: Exclude<ProjectLimitName, 'events_per_day'>; perSecond: number; retryAfterSeconds: number }
  /** The day's quota is used up: drop the events and answer 200, as PostHog does. */
  | { kind: 'quota_exhausted'; perDay: number };

/** What a request would add: its events, and for a historical request its messages. */
export interface LimitedRequest {
  /** The project's API key (its record carries the limits) and id. */
  token: string;
  projectId: number;
  historical: boolean;
  events: number;
  /** HISTORICAL messages it publishes (one per shard it touches, more for large ones). */
  messages: number;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

interface ProjectState {
  realtime?: Bucket;
  historical?: Bucket;
  day: number;
  dayEvents: number;
}

const DAY_MS = 86_400_000;

/** Takes `cost` from the bucket if any token is left; otherwise the seconds until one is. */
function take(state: ProjectState, which: 'realtime' | 'historical', perSecond: number, cost: number, nowMs: number): number {
  const bucket = (state[which] ??= { tokens: perSecond, updatedMs: nowMs });
  // A lowered limit applies at once: never more than a second's worth at the new rate.
  bucket.tokens = Math.min(perSecond, bucket.tokens + ((nowMs - bucket.updatedMs) / 1000) * perSecond);
  bucket.updatedMs = nowMs;
  if (bucket.tokens > 0) {
    bucket.tokens -= cost;
    return 0;
  }
  return Math.max(1, Math.ceil(-bucket.tokens / perSecond + 1e-9));
}

export class ProjectLimiter {
  private readonly projects = new Map<number, ProjectState>();

  constructor(
    /** The limits the key's record carries now (undefined: none). */
    private readonly limitsOf: (token: string) => ProjectLimits | undefined,
  ) {}

  decide(request: LimitedRequest, nowMs: number): LimitDecision {
    const limits = this.limitsOf(request.token);
    if (!limits || request.events === 0) return { kind: 'accept' };
    const { eventsPerSecond, eventsPerDay, historicalMessagesPerSecond } = limits;
    let state = this.projects.get(request.projectId);
    if (!state) this.projects.set(request.projectId, (state = { day: Math.floor(nowMs / DAY_MS), dayEvents: 0 }));

    if (eventsPerDay !== undefined) {
      const day = Math.floor(nowMs / DAY_MS);
      if (day !== state.day) {
        state.day = day;
        state.dayEvents = 0;
      }
      if (state.dayEvents >= eventsPerDay) return { kind: 'quota_exhausted', perDay: eventsPerDay };
    }
    if (request.historical && historicalMessagesPerSecond !== undefined) {
      const wait = take(state, 'historical', historicalMessagesPerSecond, request.messages, nowMs);
      if (wait > 0) return { kind: 'rate_limited', limit: 'historical_messages_per_second', perSecond: historicalMessagesPerSecond, retryAfterSeconds: wait };
    }
    if (!request.historical && eventsPerSecond !== undefined) {
      const wait = take(state, 'realtime', eventsPerSecond, request.events, nowMs);
      if (wait > 0) return { kind: 'rate_limited', limit: 'events_per_second', perSecond: eventsPerSecond, retryAfterSeconds: wait };
    }
    // Counted once let through: a request refused for its rate did not use the quota.
    state.dayEvents += request.events;
    return { kind: 'accept' };
  }
}
