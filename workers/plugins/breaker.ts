// The circuit breaker of one plugin instance (docs/plugins.md, "Failures"): the outcome of each of
// the last M events it handled (ok, failed, timed out) in a ring. When N of them failed, or
// PLUGIN_BREAKER_TIMEOUTS of them timed out (each held its shard up to twice the CPU limit), the
// breaker opens: the instance stops running and the config is disabled.
const OK = 0;
const FAILED = 1;
const TIMED_OUT = 2;

export interface BreakerSettings {
  /** Failures (timeouts included) among the last `of` events that open it; 0: never. */
  failures: number;
  of: number;
  /** Timeouts among the last `of` events that open it; 0: never. */
  timeouts: number;
}

export class PluginBreaker {
  private readonly ring: Uint8Array;
  private at = 0;
  private failed = 0;
  private timedOut = 0;
  private openReason: string | undefined;

  constructor(private readonly settings: BreakerSettings) {
    this.ring = new Uint8Array(Math.max(1, settings.of));
  }

  get open(): string | undefined {
    return this.openReason;
  }

  /** Records `ok` successes and the failures and timeouts of a batch; returns why it opened, if it did. */
  record(ok: number, failures: number, timeouts: number): string | undefined {
    if (this.openReason) return this.openReason;
    // A whole window of successes clears it at once (the common case, cheap).
    if (failures === 0 && timeouts === 0 && ok >= this.ring.length) {
      this.ring.fill(OK);
      this.failed = 0;
      this.timedOut = 0;
      return undefined;
    }
    for (let i = 0; i < ok; i++) this.push(OK);
    for (let i = 0; i < failures; i++) this.push(FAILED);
    for (let i = 0; i < timeouts; i++) this.push(TIMED_OUT);
    const { failures: n, of, timeouts: t } = this.settings;
    if (n > 0 && this.failed + this.timedOut >= n) {
      this.openReason = `${this.failed + this.timedOut} of its last ${of} events failed (PLUGIN_BREAKER ${n}/${of})`;
    } else if (t > 0 && this.timedOut >= t) {
      this.openReason = `${this.timedOut} of its last ${of} events ran out of time (PLUGIN_BREAKER_TIMEOUTS ${t})`;
    }
    return this.openReason;
  }

  private push(outcome: number): void {
    const old = this.ring[this.at]!;
    if (old === FAILED) this.failed--;
    else if (old === TIMED_OUT) this.timedOut--;
    this.ring[this.at] = outcome;
    if (outcome === FAILED) this.failed++;
    else if (outcome === TIMED_OUT) this.timedOut++;
    this.at = (this.at + 1) % this.ring.length;
  }
}
