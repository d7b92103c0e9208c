import { v7 } from 'uuid';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && value.length === 36 && UUID.test(value);
}

/** Time-ordered UUID (RFC 9562 v7), as PostHog capture generates for events without one. */
export function uuidv7(): string {
  return v7();
}
