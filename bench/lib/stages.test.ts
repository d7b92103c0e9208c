import { describe, expect, it } from 'vitest';
import { describeError, runStage, stageSummary } from './stages.js';

describe('bench stages', () => {
  it('stages - a stage that finishes is ok', async () => {
    const s = await runStage(() => Promise.resolve(), { limitS: 5 });
    expect(s.state).toBe('ok');
  });

  it('stages - a stage that throws is failed with its reason, and nothing is thrown', async () => {
    const s = await runStage(
      async () => {
        await Promise.resolve();
        throw new Error('the worker exited\nwith a long trace');
      },
      { limitS: 5 },
    );
    expect(stageSummary(s)).toBe('failed: the worker exited');
  });

  it('stages - a stage over its time limit is told to stop through its signal and failed', async () => {
    let stopped = false;
    const s = await runStage(
      (signal) =>
        new Promise<void>((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            stopped = true;
            reject(signal.reason as Error);
          });
        }),
      { limitS: 0.1, graceS: 1 },
    );
    expect(stopped).toBe(true);
    expect(stageSummary(s)).toBe('failed: timed out after 0.1 s');
  });

  it('stages - a stage that ignores its signal is abandoned after the grace', async () => {
    const started = performance.now();
    const s = await runStage(() => new Promise<void>(() => undefined), { limitS: 0.1, graceS: 0.1 });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(stageSummary(s)).toMatch(/^failed: timed out after 0.1 s \(and still running/);
  });

  it('stages - errors are one line with their class when it says something', () => {
    class ShardStalled extends Error {
      override name = 'ShardStalled';
    }
    expect(describeError(new ShardStalled('shard 3'))).toBe('ShardStalled: shard 3');
    expect(describeError('x'.repeat(400))).toHaveLength(298);
  });
});
