// The worker benchmarks' event mix: 80% custom events of known persons ($pageview and a custom
// event; one event in twenty carries $groups), 10% $identify of a new anonymous id,
// 5% $create_alias, 5% $groupidentify. Deterministic apart from uuids and timestamps.
import { uuidv7, type CapturedEvent } from '../../lib/index.js';

/** The project every generated event belongs to. */
export const PROJECT = 1;

/** Captured events in the mix of the worker benchmark (see throughput.ts), over `persons` known distinct ids. */
export class MixGenerator {
  private counter = 0;
  readonly mix = { custom: 0, identify: 0, create_alias: 0, groupidentify: 0 };
  constructor(private readonly persons: number) {}

  next(): CapturedEvent {
    const n = this.counter++;
    const user = `user-${(n * 7919) % this.persons}`;
    const now = new Date().toISOString();
    const base = { uuid: uuidv7(), distinct_id: user, timestamp: now, now, token: 'phc_bench', project_id: PROJECT, ip: '10.0.0.1' };
    const slot = n % 20;
    if (slot < 16) {
      this.mix.custom++;
      return {
        ...base,
        event: slot % 2 === 0 ? '$pageview' : 'button clicked',
        properties: {
          $current_url: `https://example.com/page/${n % 97}`,
          $browser: 'Chrome',
          $os: 'Mac OS X',
          $lib: 'web',
          $lib_version: '1.100.0',
          $session_id: `s-${n % 1000}`,
          $screen_width: 1920,
          $screen_height: 1080,
          plan_viewed: n % 3 === 0 ? 'pro' : 'free',
          ...(slot === 3 ? { $groups: { company: `co-${n % 500}` } } : {}),
        },
      };
    }
    if (slot < 18) {
      this.mix.identify++;
      return {
        ...base,
        event: '$identify',
        properties: { $anon_distinct_id: `anon-${n}`, $set: { last_login: now, plan: n % 2 ? 'pro' : 'free' }, $set_once: { first_seen: now } },
      };
    }
    if (slot === 18) {
      this.mix.create_alias++;
      return { ...base, event: '$create_alias', properties: { alias: `alias-${n}` } };
    }
    this.mix.groupidentify++;
    return {
      ...base,
      event: '$groupidentify',
      properties: {
        $group_type: n % 40 === 19 ? 'team' : 'company',
        $group_key: `co-${n % 500}`,
        $group_set: { name: `Company ${n % 500}`, employees: n % 1000, date_joined: '2020-01-01T00:00:00Z' },
      },
    };
  }
}
