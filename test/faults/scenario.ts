// One fault scenario under load, as both fault suites run it (test/faults: one machine,
// test/multihost: hosts in network namespaces): a steady load with SDK-style retries starts, the
// fault strikes (and, for a partition, heals), then the cluster must become healthy again by
// itself and every acknowledged event must reach PROCESSED exactly once.
import { setTimeout as sleep } from 'node:timers/promises';
import { newStats, runLoad, type LoadOptions, type LoadStats } from './load.js';
import type { ProcessedCounter } from './processed.js';

export interface Outcome {
  scenario: string;
  /** How long the fault lasted, from striking to healed (0 for a kill). */
  heldMs: number;
  sent: number;
  acknowledged: number;
  processed: number;
  duplicates: number;
  lost: number;
  /** Requests that got no 2xx within their retries (their events were never acknowledged). */
  failedRequests: number;
  /** From the end of the fault until every health check passed. */
  healthyAfterMs: number;
  /** From the end of the fault until every acknowledged event was in PROCESSED. */
  caughtUpAfterMs: number;
}

export interface ScenarioContext {
  load: Omit<LoadOptions, 'label'>;
  processed: ProcessedCounter;
  /** What fails now, by name (empty: healthy). */
  unhealthy: () => Promise<string[]>;
  /** The load runs this long before the fault strikes. */
  faultAfterMs: number;
  healthyWithinMs?: number;
  caughtUpWithinMs?: number;
  /** Where acknowledged events that never reached PROCESSED are (for the failure message). */
  explainMissing?: (uuids: string[]) => Promise<string>;
}

/** Polls `failing` until it returns nothing; the error names what still failed at the deadline. */
export async function waitUntilNoneFail(what: string, failing: () => Promise<string[]>, timeoutMs: number, everyMs = 250): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // A check that throws (a request to a node that hangs) is one more thing failing.
    const now = await failing().catch((err: unknown) => [err instanceof Error ? err.message : String(err)]);
    if (now.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${what}: still failing after ${Math.round(timeoutMs / 1000)} s: ${now.join('; ')}`);
    await sleep(everyMs);
  }
}

/** How many sent events PROCESSED holds, how many twice or more, and how many acknowledged ones it lacks. */
export function tally(stats: LoadStats, counts: ReadonlyMap<string, number>): { processed: number; duplicates: number; lost: number } {
  let processed = 0;
  let duplicates = 0;
  let lost = 0;
  for (const uuid of stats.sent) {
    const n = counts.get(uuid) ?? 0;
    if (n > 0) processed++;
    if (n > 1) duplicates++;
    if (n === 0 && stats.acknowledged.has(uuid)) lost++;
  }
  return { processed, duplicates, lost };
}

async function missingFromProcessed(processed: ProcessedCounter, stats: LoadStats): Promise<string[]> {
  await processed.refresh();
  let missing = 0;
  let first: string | undefined;
  for (const uuid of stats.acknowledged) {
    if (processed.counts.has(uuid)) continue;
    missing++;
    first ??= uuid;
  }
  return missing === 0 ? [] : [`${missing} of ${stats.acknowledged.size} acknowledged events not in PROCESSED (one: ${first})`];
}

/** `fault` strikes and resolves once the fault is over (healed, or at once for a kill). */
export async function survive(ctx: ScenarioContext, scenario: string, label: string, fault: () => Promise<void> | void): Promise<Outcome> {
  const stats = newStats();
  const load = runLoad({ ...ctx.load, label }, stats);
  await sleep(ctx.faultAfterMs);
  const struckAt = Date.now();
  await fault();
  const healedAt = Date.now();
  await sleep(500);
  await waitUntilNoneFail(`${scenario}: healthy again`, ctx.unhealthy, ctx.healthyWithinMs ?? 120_000);
  const healthyAfterMs = Date.now() - healedAt;
  await load;
  await waitUntilNoneFail(`${scenario}: every acknowledged event processed`, () => missingFromProcessed(ctx.processed, stats), ctx.caughtUpWithinMs ?? 180_000, 500).catch(
    async (err: unknown) => {
      const missing = [...stats.acknowledged].filter((u) => !ctx.processed.counts.has(u)).slice(0, 20);
      const where = ctx.explainMissing ? await ctx.explainMissing(missing).catch((e: unknown) => `(could not look: ${String(e)})`) : '';
      throw new Error(`${err instanceof Error ? err.message : String(err)}${where ? `\n${where}` : ''}`, { cause: err });
    },
  );
  const caughtUpAfterMs = Date.now() - healedAt;
  // Late duplicates (if any) get time to show before counting.
  await sleep(3_000);
  await ctx.processed.refresh();
  return {
    scenario,
    heldMs: healedAt - struckAt,
    sent: stats.sent.size,
    acknowledged: stats.acknowledged.size,
    ...tally(stats, ctx.processed.counts),
    failedRequests: stats.failedRequests,
    healthyAfterMs,
    caughtUpAfterMs,
  };
}

/** A Markdown table, columns padded (the first left-aligned, the others right-aligned). */
export function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
