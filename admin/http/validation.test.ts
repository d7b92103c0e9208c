import { describe, expect, it } from 'vitest';
import { type z } from 'zod';
import { ApiError } from '../../lib/index.js';
import { pluginCreate } from '../pipeline-schemas.js';
import { domainCreate, inviteCreate, organizationCreate } from '../schemas.js';
import { normalizeEmail, validate } from './validation.js';

function failure(schema: z.ZodType, data: unknown): { code: string; detail: string; attr: string | null } {
  try {
    validate(schema, data);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    return { code: e.code, detail: e.message, attr: e.attr };
  }
  throw new Error('expected a validation failure');
}

describe('validation', () => {
  it('validation - missing, null, wrong type and too long fields, worded as DRF does', () => {
    expect(failure(organizationCreate, {})).toEqual({ code: 'validation_error', detail: 'This field is required.', attr: 'name' });
    expect(failure(organizationCreate, { name: null })).toMatchObject({ detail: 'This field may not be null.', attr: 'name' });
    expect(failure(organizationCreate, { name: 5 })).toMatchObject({ detail: 'Not a valid string.', attr: 'name' });
    expect(failure(organizationCreate, { name: '' })).toMatchObject({ detail: 'This field may not be blank.' });
    expect(failure(organizationCreate, { name: 'x'.repeat(65) })).toMatchObject({
      detail: 'Ensure this field has no more than 64 characters.',
    });
    expect(failure(organizationCreate, { name: 'a', enforce_2fa: 'yes' })).toMatchObject({ detail: 'Must be a valid boolean.', attr: 'enforce_2fa' });
    expect(failure(organizationCreate, { name: 'a', logo_media_id: 'nope' })).toMatchObject({ detail: 'Must be a valid UUID.', attr: 'logo_media_id' });
  });

  it('validation - a body that is not an object names no field', () => {
    expect(failure(organizationCreate, [])).toEqual({
      code: 'validation_error',
      detail: 'Invalid data. Expected a dictionary, but got list.',
      attr: null,
    });
    expect(failure(organizationCreate, 'x')).toMatchObject({ detail: 'Invalid data. Expected a dictionary, but got str.', attr: null });
    expect(failure(organizationCreate, null)).toMatchObject({ detail: 'Invalid data. Expected a dictionary, but got NoneType.', attr: null });
  });

  it('validation - nested paths are joined with __', () => {
    expect(failure(inviteCreate, { target_email: 'a@b.co', private_project_access: [{ id: 1, level: 'member' }, { id: 2, level: 'boss' }] })).toEqual({
      code: 'validation_error',
      detail: '"boss" is not a valid choice.',
      attr: 'private_project_access__1__level',
    });
    expect(failure(inviteCreate, { target_email: 'a@b.co', level: 3 })).toMatchObject({ detail: '"3" is not a valid choice.', attr: 'level' });
    expect(failure(inviteCreate, { target_email: 'not an email' })).toMatchObject({ detail: 'Enter a valid email address.', attr: 'target_email' });
  });

  it('validation - strings PostgreSQL cannot hold verbatim are refused, everything else is kept', () => {
    expect(failure(organizationCreate, { name: 'a\u0000b' })).toMatchObject({ detail: 'Null characters are not allowed.', attr: 'name' });
    expect(failure(organizationCreate, { name: 'a\ud800b' })).toMatchObject({ detail: 'Invalid Unicode: unpaired surrogate.' });
    const tricky = "O'Brien \"; DROP TABLE users; -- ∑ 😀 \\ %_ $1";
    expect(validate(organizationCreate, { name: tricky }).name).toBe(tricky);
  });

  it('validation - free-form JSON (stored as jsonb) refuses NUL and lone surrogates in any key or value, naming where', () => {
    expect(failure(pluginCreate, { metrics: { a: { b: ['ok', 'x\u0000'] } } })).toMatchObject({ detail: 'Null characters are not allowed.', attr: 'metrics__a__b__1' });
    expect(failure(pluginCreate, { public_jobs: { ['k\udc00']: 1 } })).toMatchObject({ detail: 'Invalid Unicode: unpaired surrogate.', attr: 'public_jobs__k\udc00' });
    expect(failure(pluginCreate, { config_schema: [{ key: 'url', name: '\u0000' }] })).toMatchObject({ attr: 'config_schema__0__name' });
    const kept = { nested: [1, null, true, { '😀': "O'Brien \\u0000 as text" }] };
    expect(validate(pluginCreate, { metrics: kept }).metrics).toEqual(kept);
  });

  it('validation - domains must be lowercase host names with a TLD', () => {
    for (const ok of ['example.com', 'a-b.example.co.uk', 'x1.io']) expect(validate(domainCreate, { domain: ok }).domain).toBe(ok);
    for (const bad of ['Example.com', 'localhost', '-a.com', 'a..com', 'http://a.com', 'a.c', 'a_b.com']) {
      expect(failure(domainCreate, { domain: bad }), bad).toEqual({
        code: 'validation_error',
        detail: 'Please enter a valid domain or subdomain name.',
        attr: 'domain',
      });
    }
  });

  it('validation - only the domain part of an email is lowercased', () => {
    expect(normalizeEmail('Jane.Doe@Example.COM')).toBe('Jane.Doe@example.com');
  });
});
