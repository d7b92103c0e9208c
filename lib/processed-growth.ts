// What processing adds to a captured line on its way to PROCESSED (ARCHITECTURE.md: "the captured
// fields plus person_id and $group_N properties"), in bytes. Ingest keeps room for it under the
// server's max_payload, so that a line it answered 200 for can always be published processed; the
// worker plans its PROCESSED messages with the same figures.
import { isPlainObject } from './wire.js';

/** PostHog's group rules: a group key of at most 400 characters, five group types per project. */
export const MAX_GROUP_KEY_LENGTH = 400;
export const MAX_GROUP_TYPES_PER_PROJECT = 5;

/** What processing appends to a line besides `$group_N`: `,"person_id":"<uuid>"` and the newline. */
export const PERSON_ID_TAIL = ',"person_id":"00000000-0000-0000-0000-000000000000"'.length + 1;

/** `,"$group_0":` before each key processing adds. */
const GROUP_MEMBER_BYTES = ',"$group_0":'.length;

/** The most bytes `$group_N` can add to any line (five types, keys of 400 characters of 6-byte escapes). */
export const MAX_GROUPS_GROWTH = MAX_GROUP_TYPES_PER_PROJECT * (GROUP_MEMBER_BYTES + 2 + 6 * MAX_GROUP_KEY_LENGTH);

/** A group key as PostHog sanitises it: strings and numbers, at most 400 characters. */
export function groupKeyOf(value: unknown): string | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string' || value.length === 0) return undefined;
  return value;
}

/**
 * The most bytes processing can add to a line with these properties as `$group_N` (the worker's
 * attachGroups: a key of `$groups` that is a group key, for at most five types with an index).
 */
export function groupsGrowth(properties: Readonly<Record<string, unknown>>): number {
  const groups = properties.$groups;
  if (!isPlainObject(groups)) return 0;
  const sizes: number[] = [];
  for (const value of Object.values(groups)) {
    const key = groupKeyOf(value);
    if (key !== undefined && key.length <= MAX_GROUP_KEY_LENGTH) sizes.push(GROUP_MEMBER_BYTES + Buffer.byteLength(JSON.stringify(key)));
  }
  return sizes.sort((a, b) => b - a).slice(0, MAX_GROUP_TYPES_PER_PROJECT).reduce((sum, n) => sum + n, 0);
}
