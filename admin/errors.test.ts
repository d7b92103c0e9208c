import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../lib/index.js';
import { adminErrors, apiError, toErrorResponse, UNEXPECTED_ERROR_CODE } from './errors.js';

const documented = readFileSync(new URL('./ERRORS.md', import.meta.url), 'utf8');

/** Rows of the ERRORS.md table: code → { status, type }. */
function documentedRows(): Map<string, { status: number; type: string }> {
  const rows = new Map<string, { status: number; type: string }>();
  for (const line of documented.split('\n')) {
    const m = /^\| `([a-z_]+)` \| (\d{3}) \| `([a-z_]+)` \|/.exec(line);
    if (m) rows.set(m[1]!, { status: Number(m[2]), type: m[3]! });
  }
  return rows;
}

describe('admin errors', () => {
  it('errors - every code of the registry is documented in ERRORS.md with its status and type', () => {
    const rows = documentedRows();
    for (const [code, spec] of Object.entries(adminErrors)) {
      expect(rows.get(code), `ERRORS.md row for ${code}`).toEqual({ status: spec.status, type: spec.type });
    }
    expect(rows.get(UNEXPECTED_ERROR_CODE)).toEqual({ status: 500, type: 'server_error' });
  });

  it('errors - ERRORS.md documents no code the server cannot answer with', () => {
    const known = new Set([...Object.keys(adminErrors), UNEXPECTED_ERROR_CODE]);
    for (const code of documentedRows().keys()) expect(known.has(code), code).toBe(true);
  });

  it('errors - the mapper keeps detail and attr and uses the registry status', () => {
    expect(toErrorResponse(apiError('validation_error', 'Enter a valid email address.', 'target_email'))).toEqual({
      status: 400,
      headers: {},
      body: { type: 'validation_error', code: 'validation_error', detail: 'Enter a valid email address.', attr: 'target_email' },
    });
    expect(toErrorResponse(apiError('not_found')).body).toEqual({ type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null });
  });

  it('errors - anything unexpected becomes 500 `error` without leaking its message', () => {
    const res = toErrorResponse(new Error('connection string postgres://secret'));
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ type: 'server_error', code: 'error', detail: 'A server error occurred.', attr: null });
    expect(toErrorResponse(new ApiError('no_such_code')).status).toBe(500);
  });
});
