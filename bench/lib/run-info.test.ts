import { describe, expect, it } from 'vitest';
import { commandLine, gitCommit, runInfo } from './run-info.js';

describe('bench run info', () => {
  it('run info - the command line is the npm command as typed, quoted to be pasted', () => {
    expect(commandLine(['node', '/x/dist/bench/run.js', '--only', 'batch 1000', '--runs', '5'], { npm_lifecycle_event: 'bench' })).toBe("npm run bench -- --only 'batch 1000' --runs 5");
    expect(commandLine(['node', '/x/dist/bench/run.js'], { npm_lifecycle_event: 'bench' })).toBe('npm run bench');
    expect(commandLine(['node', `${process.cwd()}/dist/bench/run.js`, '--quick'], {})).toMatch(/^node .*dist\/bench\/run\.js --quick$/);
  });

  it('run info - records the commit and the versions of what is measured', () => {
    expect(gitCommit()).toMatch(/^[0-9a-f]{7,}( \(dirty\))?$/);
    const info = runInfo();
    expect(info.versions.node).toBe(process.version);
    expect(info.versions.autocannon).toMatch(/^\d+\.\d+\.\d+/);
    expect(info.versions.uws).toMatch(/\.node\)$/);
  });
});
