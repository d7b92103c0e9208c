import { describe, expect, it } from 'vitest';
import { CaptureError } from '../errors.js';
import { resolveToken } from './token.js';

function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof CaptureError) return `${err.code}: ${err.message}`;
    throw err;
  }
  return 'no error';
}

describe('token', () => {
  it('token - the batch-level key wins, trimmed', () => {
    expect(resolveToken(' phc_a ', [{ token: 'phc_b' }])).toBe('phc_a');
  });

  it('token - taken from events (token, $token, api_key, properties.token) when they agree', () => {
    expect(resolveToken(undefined, [{ token: 'phc_a' }, { $token: 'phc_a' }, { api_key: 'phc_a ' }, { properties: { token: 'phc_a' } }, {}])).toBe('phc_a');
  });

  it('token - different keys inside one batch are refused', () => {
    expect(failure(() => resolveToken(undefined, [{ token: 'phc_a' }, { token: 'phc_b' }]))).toMatch(/^inconsistent_api_key/);
  });

  it('token - missing and malformed keys are refused with the reason', () => {
    expect(failure(() => resolveToken(undefined, [{}]))).toMatch(/^missing_api_key/);
    expect(failure(() => resolveToken('   ', []))).toBe('invalid_api_key: API key is not valid: empty');
    expect(failure(() => resolveToken('x'.repeat(65), []))).toBe('invalid_api_key: API key is not valid: too_long');
    expect(failure(() => resolveToken('phc_é', []))).toBe('invalid_api_key: API key is not valid: not_ascii');
    expect(failure(() => resolveToken('phx_personal', []))).toBe('invalid_api_key: API key is not valid: personal_api_key');
    expect(failure(() => resolveToken('phc\0x', []))).toBe('invalid_api_key: API key is not valid: null_byte');
    expect(failure(() => resolveToken(12, []))).toBe('invalid_api_key: API key is not valid: not a string');
    expect(resolveToken('x'.repeat(64), [])).toBe('x'.repeat(64));
  });
});
