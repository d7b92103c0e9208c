// The start-up shell as an operator meets it: a real process, real signals, its exit code and output.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../kit/index.js';

const fixture = new URL('../fixtures/shell-deployable.ts', import.meta.url).pathname;

function run(env: Record<string, string>, args: string[] = [], options: { lifeline?: boolean } = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env, ...(options.lifeline ? { SPATE_LIFELINE_FD: '3' } : {}) },
    // fd 3: the lifeline, as the launcher gives it (this test holds the other end).
    stdio: options.lifeline ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, out, exit };
}

/** The pino lines a process printed, parsed. */
function logLines(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('process shell', () => {
  it('process shell - --help prints the settings and exits 0', async () => {
    const p = run({}, ['--help']);
    expect(await p.exit).toEqual({ code: 0, signal: null });
    expect(p.out.stdout).toContain('FIXTURE_MODE');
  });

  it('process shell - an invalid setting exits 2 with every problem on stderr, before starting', async () => {
    const p = run({ FIXTURE_MODE: 'sideways' });
    expect(await p.exit).toEqual({ code: 2, signal: null });
    expect(p.out.stderr).toContain('invalid configuration');
    expect(p.out.stderr).toContain('FIXTURE_MODE');
    expect(p.out.stderr).toContain('"sideways"');
    expect(p.out.stdout).not.toContain('fixture: started');
  });

  it('process shell - SIGTERM calls stop() once, waits for it, and exits 0', async () => {
    const p = run({});
    await waitFor('started', () => p.out.stdout.includes('fixture: started'), 30_000);
    p.child.kill('SIGTERM');
    expect(await p.exit).toEqual({ code: 0, signal: null });
    expect(p.out.stdout.match(/fixture: stop called/g)).toHaveLength(1);
    expect(p.out.stdout).toContain('fixture: stop finished');
    const messages = logLines(p.out.stdout).map((l) => l.msg);
    expect(messages).toEqual(expect.arrayContaining(['started', 'stopping', 'stopped']));
    expect(logLines(p.out.stdout).find((l) => l.msg === 'stopping')).toMatchObject({ name: 'fixture', signal: 'SIGTERM' });
  });

  it('process shell - a second signal exits at once (128 + its number) while stop() is still running', async () => {
    const p = run({ FIXTURE_MODE: 'hang-stop' });
    await waitFor('started', () => p.out.stdout.includes('fixture: started'), 30_000);
    p.child.kill('SIGINT');
    await waitFor('stop called', () => p.out.stdout.includes('fixture: stop called'), 10_000);
    const before = Date.now();
    p.child.kill('SIGTERM');
    expect(await p.exit).toEqual({ code: 143, signal: null });
    expect(Date.now() - before).toBeLessThan(2_000);
    expect(p.out.stdout.match(/fixture: stop called/g)).toHaveLength(1);
    expect(logLines(p.out.stdout).map((l) => l.msg)).toContain('second signal: exiting without finishing the stop');
  });

  it('process shell - a failed start undoes what it opened, newest first, logs the error and exits 1', async () => {
    const p = run({ FIXTURE_MODE: 'fail-start' });
    expect(await p.exit).toEqual({ code: 1, signal: null });
    const undone = p.out.stdout.split('\n').filter((l) => l.startsWith('fixture: undo'));
    expect(undone).toEqual(['fixture: undo connection', 'fixture: undo timer']);
    const fatal = logLines(p.out.stdout).find((l) => l.msg === 'failed to start');
    expect(fatal).toMatchObject({ level: 60, err: { message: 'the fixture cannot start' } });
  });

  it('process shell - a signal while starting exits at once instead of waiting for the start', async () => {
    const p = run({ FIXTURE_MODE: 'slow-start' });
    await waitFor('starting', () => p.out.stdout.includes('fixture: starting'), 30_000);
    p.child.kill('SIGTERM');
    expect(await p.exit).toEqual({ code: 143, signal: null });
    expect(logLines(p.out.stdout).map((l) => l.msg)).toContain('signal while starting: exiting');
  });

  it('process shell - when its supervisor\'s lifeline closes it calls stop() once and exits 0', async () => {
    const p = run({}, [], { lifeline: true });
    await waitFor('started', () => p.out.stdout.includes('fixture: started'), 30_000);
    // Still running while the supervisor lives.
    await new Promise((r) => setTimeout(r, 300));
    expect(p.child.exitCode).toBeNull();
    p.child.stdio[3]!.destroy(); // what the kernel does to the pipe when the supervisor dies
    expect(await p.exit).toEqual({ code: 0, signal: null });
    expect(p.out.stdout.match(/fixture: stop called/g)).toHaveLength(1);
    expect(logLines(p.out.stdout).map((l) => l.msg)).toEqual(expect.arrayContaining(['supervisor gone: stopping', 'stopped']));
  });

  it('process shell - without its supervisor a stop that hangs is cut short after 3 s (exit 1)', async () => {
    const p = run({ FIXTURE_MODE: 'hang-stop' }, [], { lifeline: true });
    await waitFor('started', () => p.out.stdout.includes('fixture: started'), 30_000);
    const before = Date.now();
    p.child.stdio[3]!.destroy();
    expect(await p.exit).toEqual({ code: 1, signal: null });
    expect(Date.now() - before).toBeGreaterThanOrEqual(2_900);
    expect(Date.now() - before).toBeLessThan(4_500);
    expect(logLines(p.out.stdout).map((l) => l.msg)).toContain('stop did not finish in time: exiting');
  });

  it('process shell - a supervisor gone while starting ends the start at once (exit 1)', async () => {
    const p = run({ FIXTURE_MODE: 'slow-start' }, [], { lifeline: true });
    await waitFor('starting', () => p.out.stdout.includes('fixture: starting'), 30_000);
    p.child.stdio[3]!.destroy();
    expect(await p.exit).toEqual({ code: 1, signal: null });
    expect(logLines(p.out.stdout).map((l) => l.msg)).toContain('supervisor gone while starting: exiting');
  });
});
