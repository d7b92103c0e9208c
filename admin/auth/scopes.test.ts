import { describe, expect, it } from 'vitest';
import { hasScope, parseScopes } from './scopes.js';

describe('scopes', () => {
  it('scopes - write implies read of the same object only; * allows everything', () => {
    expect(hasScope(['organization:write'], 'organization:read')).toBe(true);
    expect(hasScope(['organization:write'], 'organization:write')).toBe(true);
    expect(hasScope(['organization:read'], 'organization:write')).toBe(false);
    expect(hasScope(['organization:write'], 'organization_member:read')).toBe(false);
    expect(hasScope(['organization_member:write'], 'organization:read')).toBe(false);
    expect(hasScope(['*'], 'project:write')).toBe(true);
    expect(hasScope([], 'project:read')).toBe(false);
  });

  it('scopes - the CLI form is parsed, deduplicated and checked against known scopes', () => {
    expect(parseScopes('organization:read, project:write,organization:read')).toEqual(['organization:read', 'project:write']);
    expect(parseScopes('*')).toEqual(['*']);
    expect(() => parseScopes('organisation:read')).toThrow(/unknown scope\(s\): organisation:read/);
    expect(() => parseScopes('organization:delete')).toThrow(/unknown scope/);
    expect(() => parseScopes('*,project:read')).toThrow(/alone/);
    expect(() => parseScopes(' , ')).toThrow(/no scopes/);
  });
});
