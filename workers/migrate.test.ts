// The workers refuse a PostgreSQL too old for their statements, with a message that says why.
import { describe, expect, it } from 'vitest';
import { serverVersionProblem } from './migrate.js';

describe('PostgreSQL version', () => {
  it('serverVersionProblem - 13 is refused naming the version and the need; 14 and newer pass', () => {
    const problem = serverVersionProblem(130_011, '13.11 (Debian 13.11-1)');
    expect(problem).toContain('13.11 (Debian 13.11-1)');
    expect(problem).toContain('14 or newer');
    expect(serverVersionProblem(140_000, '14.0')).toBeUndefined();
    expect(serverVersionProblem(150_010, '15.10')).toBeUndefined();
  });
});
