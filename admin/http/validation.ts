// Request validation with zod, answered in the API's envelope: the first problem only, as
// `validation_error` with `attr` = the field path joined by "__" (null for the body itself),
// and details worded as PostHog (Django REST framework) words them.
import { z } from 'zod';
import { apiError } from '../errors.js';

type RawIssue = z.core.$ZodRawIssue;

function pythonTypeName(value: unknown): string {
  if (value === null) return 'NoneType';
  if (Array.isArray(value)) return 'list';
  switch (typeof value) {
    case 'string':
      return 'str';
    case 'number':
      return Number.isInteger(value) ? 'int' : 'float';
    case 'boolean':
      return 'bool';
    default:
      return typeof value;
  }
}

/** DRF-style message for one zod issue (schemas may override with their own message). */
export function issueMessage(issue: RawIssue): string | undefined {
  const input = issue.input;
  switch (issue.code) {
    case 'invalid_type':
      if (input === undefined) return 'This field is required.';
      if (issue.expected === 'object' || issue.expected === 'record') return `Invalid data. Expected a dictionary, but got ${pythonTypeName(input)}.`;
      if (input === null) return 'This field may not be null.';
      switch (issue.expected) {
        case 'string':
          return 'Not a valid string.';
        case 'boolean':
          return 'Must be a valid boolean.';
        case 'number':
        case 'int':
          return 'A valid integer is required.';
        case 'array':
          return `Expected a list of items but got type "${pythonTypeName(input)}".`;
        default:
          return undefined;
      }
    case 'too_big':
      if (issue.origin === 'string') return `Ensure this field has no more than ${issue.maximum} characters.`;
      if (issue.origin === 'array') return `Ensure this field has no more than ${issue.maximum} elements.`;
      if (issue.origin === 'number' || issue.origin === 'int') return `Ensure this value is less than or equal to ${issue.maximum}.`;
      return undefined;
    case 'too_small':
      if (issue.origin === 'string') return 'This field may not be blank.';
      if (issue.origin === 'number' || issue.origin === 'int') return `Ensure this value is greater than or equal to ${issue.minimum}.`;
      return undefined;
    case 'invalid_value':
      if (input === undefined) return 'This field is required.';
      if (input === null) return 'This field may not be null.';
      return `"${typeof input === 'string' ? input : JSON.stringify(input)}" is not a valid choice.`;
    case 'invalid_format':
      if (issue.format === 'email') return 'Enter a valid email address.';
      if (issue.format === 'uuid' || issue.format === 'guid') return 'Must be a valid UUID.';
      return undefined;
    default:
      return undefined;
  }
}

/** Validates `data` against `schema`; throws a 400 `validation_error` naming the first bad field. */
export function validate<T extends z.ZodType>(schema: T, data: unknown, attrPrefix: readonly PropertyKey[] = []): z.output<T> {
  const result = schema.safeParse(data, { error: issueMessage });
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = [...attrPrefix, ...issue.path];
  throw apiError('validation_error', issue.message, path.length > 0 ? path.map(String).join('__') : null);
}

// --- Field helpers shared by request schemas -------------------------------------------------

/** Why PostgreSQL cannot store `s` verbatim, if it cannot: NUL (neither text nor jsonb holds it) or a lone UTF-16 surrogate (no UTF-8 form; it would come back as U+FFFD). */
function unstorableString(s: string): string | undefined {
  if (s.includes('\u0000')) return 'Null characters are not allowed.';
  if (!s.isWellFormed()) return 'Invalid Unicode: unpaired surrogate.';
  return undefined;
}

/** A string PostgreSQL can store verbatim. */
export function text(maxLength?: number) {
  const base = maxLength === undefined ? z.string() : z.string().max(maxLength);
  return base.superRefine((s, ctx) => {
    const message = unstorableString(s);
    if (message) ctx.addIssue({ code: 'custom', message });
  });
}

/** Where inside a JSON value (keys included) a string sits that PostgreSQL cannot store, and why. */
export function unstorableJson(value: unknown, path: PropertyKey[] = []): { path: PropertyKey[]; message: string } | undefined {
  if (typeof value === 'string') {
    const message = unstorableString(value);
    return message ? { path, message } : undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const entries: [PropertyKey, unknown][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  for (const [key, inner] of entries) {
    const keyMessage = typeof key === 'string' ? unstorableString(key) : undefined;
    if (keyMessage) return { path: [...path, key], message: keyMessage };
    const found = unstorableJson(inner, [...path, key]);
    if (found) return found;
  }
  return undefined;
}

/** `schema`, refusing values with strings PostgreSQL cannot store (see unstorableJson). */
export function storable<T extends z.ZodType>(schema: T): T {
  return schema.superRefine((value, ctx) => {
    const found = unstorableJson(value);
    if (found) ctx.addIssue({ code: 'custom', message: found.message, path: found.path });
  });
}

/** An email address; its domain part is lowercased by the caller (normalizeEmail). */
export const email = () =>
  z
    .email({ message: 'Enter a valid email address.' })
    .max(254, { message: 'Ensure this field has no more than 254 characters.' });

export function normalizeEmail(address: string): string {
  const at = address.lastIndexOf('@');
  return at < 0 ? address : address.slice(0, at) + address.slice(at).toLowerCase();
}

/** Membership levels: 1 member, 8 admin, 15 owner. */
export const membershipLevel = () => z.literal([1, 8, 15]);
