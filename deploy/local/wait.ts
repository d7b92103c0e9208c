import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `check` until it returns true; throws (naming `what`) after `timeoutMs`, or at once when `signal` aborts. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 20_000,
  everyMs = 50,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
      // A check that throws a definite failure (e.g. the process exited) ends the wait.
      if (err instanceof Error && /exited/.test(err.message)) throw err;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
}
