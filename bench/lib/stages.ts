// The suite runs in stages (capture scenarios, latency vs rate, import, worker throughput,
// end-to-end lag), each with a time limit. A stage that throws or overruns is reported as
// failed and the others still run and are written: a hung worker stage once lost ten minutes
// of capture figures because results were only written at the very end.

export type StageStatus =
  | { state: 'pending' }
  | { state: 'running' }
  | { state: 'ok'; seconds: number }
  | { state: 'failed'; seconds: number; reason: string }
  | { state: 'skipped'; reason: string };

/** The reason a stage's signal aborts with when it overruns its time limit. */
export class StageTimeoutError extends Error {
  override name = 'StageTimeoutError';
  constructor(readonly limitS: number) {
    super(`timed out after ${limitS} s`);
  }
}

export interface StageLimits {
  /** Seconds the stage may take. */
  limitS: number;
  /** Seconds an overrun stage gets to stop what it started (its processes) once its signal aborted. */
  graceS?: number;
}

/** One line, short enough for a Markdown table cell. */
export function describeError(err: unknown): string {
  const message = err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : String(err);
  const line = message.split('\n')[0]!.trim() || 'unknown error';
  return line.length > 300 ? `${line.slice(0, 297)}…` : line;
}

/**
 * Runs `work` with a time limit; never throws. On overrun the signal aborts with a
 * StageTimeoutError so the stage can stop its load and processes; the stage is then given
 * `graceS` to settle and is failed either way. Work abandoned after the grace keeps no
 * unhandled rejection.
 */
export async function runStage(work: (signal: AbortSignal) => Promise<void>, limits: StageLimits): Promise<StageStatus> {
  const controller = new AbortController();
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  const running = (async () => work(controller.signal))();
  running.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const overrun = new Promise<'overrun'>((r) => {
    timer = setTimeout(() => r('overrun'), limits.limitS * 1000);
  });
  try {
    const first = await Promise.race([running.then(() => 'done' as const), overrun]);
    if (first === 'done') return { state: 'ok', seconds: seconds() };
    const timeout = new StageTimeoutError(limits.limitS);
    controller.abort(timeout);
    const graceS = limits.graceS ?? 20;
    const graceOver = new Promise<false>((r) => {
      timer = setTimeout(() => r(false), graceS * 1000);
    });
    const settled = await Promise.race([running.then(() => true, () => true), graceOver]);
    return { state: 'failed', seconds: seconds(), reason: settled ? timeout.message : `${timeout.message} (and still running ${graceS} s after it was told to stop)` };
  } catch (err) {
    return { state: 'failed', seconds: seconds(), reason: describeError(err) };
  } finally {
    clearTimeout(timer);
  }
}

/** "ok (12 s)", "failed: <reason>", "not run: <reason>" — how the report shows a stage. */
export function stageSummary(s: StageStatus): string {
  switch (s.state) {
    case 'pending':
      return 'pending';
    case 'running':
      return 'running (results so far)';
    case 'ok':
      return 'ok';
    case 'failed':
      return `failed: ${s.reason}`;
    case 'skipped':
      return `not run: ${s.reason}`;
  }
}
