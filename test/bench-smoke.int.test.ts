// The benchmark's smoke tests as docs/benchmarks.md gives them — `npm run bench -- --quick` (every
// stage but the end-to-end one) and `npm run bench -- --quick --only e2e` — run from source (as the
// build runs them) into a temp directory instead of bench/results/: every stage ends ok and the
// report is written, Markdown and JSON. Not figures: the rest of the suite shares the machine.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const out = mkdtempSync(join(tmpdir(), 'spate-bench-smoke-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The `npm run bench -- …` line of docs/benchmarks.md that starts with these options. */
function documented(options: string): string {
  const line = readFileSync(join(root, 'docs/benchmarks.md'), 'utf8')
    .split('\n')
    .find((l) => l.replace(/\s+#.*$/, '').trimEnd() === `npm run bench -- ${options}`);
  expect(line, `docs/benchmarks.md runs npm run bench -- ${options}`).toBeDefined();
  return options;
}

function bench(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, ['--import', 'tsx', join(root, 'bench/run.ts'), ...args, '--out', out], { cwd: root, timeout: 900_000, maxBuffer: 64 << 20 }, (err, _stdout, stderr) => {
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
    });
  });
}

interface Report {
  data: { stages: Record<string, { state: string; reason?: string }> };
}

describe.sequential('bench smoke', () => {
  it.each([
    // Every stage but the end-to-end one (the list grows with the bench: read from the report).
    ['--quick', (stage: string) => stage !== 'e2e lag'],
    ['--quick --only e2e', (stage: string) => stage === 'e2e lag'],
  ])('bench - npm run bench -- %s runs its stages to the end and writes the report', { timeout: 900_000 }, async (options, shouldRun) => {
    for (const f of readdirSync(out)) rmSync(join(out, f), { force: true });
    const r = await bench(documented(options).split(' '));
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const json = readdirSync(out).find((f) => f.endsWith('-quick.json'));
    expect(json, readdirSync(out).join(', ')).toBeDefined();
    expect(readdirSync(out)).toContain(json!.replace(/\.json$/, '.md'));
    const report = JSON.parse(readFileSync(join(out, json!), 'utf8')) as Report;
    const stages = Object.entries(report.data.stages);
    expect(stages.length).toBeGreaterThan(1);
    const outcome = Object.fromEntries(stages.map(([name, s]) => [name, s.state]));
    expect(outcome).toEqual(Object.fromEntries(stages.map(([name]) => [name, shouldRun(name) ? 'ok' : 'skipped'])));
  });
});
