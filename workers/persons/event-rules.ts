// Pure rules about single events: which distinct ids may be merged, how $set/$set_once/$unset
// change person properties, which properties an event kind requires, and how the captured line
// is normalised before processing (reference/posthog-capture.md §4 and §6).
import { isPlainObject, type CapturedEvent, type Properties } from '../../lib/index.js';

const ILLEGAL_ANY_CASE = new Set([
  'anonymous',
  'guest',
  'distinctid',
  'distinct_id',
  'id',
  'not_authenticated',
  'email',
  'undefined',
  'true',
  'false',
]);
const ILLEGAL_EXACT = new Set(['[object Object]', 'NaN', 'None', 'none', 'null', '0', 'undefined']);

function isListed(text: string): boolean {
  return ILLEGAL_EXACT.has(text) || ILLEGAL_ANY_CASE.has(text.toLowerCase());
}

/** Ids that must never be merged: blank, or a placeholder an SDK sends by mistake (also quoted). */
export function isIllegalDistinctId(id: string): boolean {
  const trimmed = id.trim();
  if (trimmed === '') return true;
  if (isListed(trimmed)) return true;
  const quoted = /^(['"])(.*)\1$/s.exec(trimmed);
  return quoted !== null && (quoted[2]!.trim() === '' || isListed(quoted[2]!));
}

/** Keys named by `$unset`: an array of keys, or an object whose keys are used. */
export function unsetKeys(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((k): k is string => typeof k === 'string');
  if (isPlainObject(value)) return Object.keys(value);
  return [];
}

export interface PersonUpdate {
  set?: Properties;
  setOnce?: Properties;
  unset: string[];
}

export function personUpdateOf(properties: Properties): PersonUpdate {
  const set = isPlainObject(properties.$set) ? properties.$set : undefined;
  const setOnce = isPlainObject(properties.$set_once) ? properties.$set_once : undefined;
  return { set, setOnce, unset: unsetKeys(properties.$unset) };
}

export function hasPersonUpdate(u: PersonUpdate): boolean {
  return (u.set !== undefined && Object.keys(u.set).length > 0) ||
    (u.setOnce !== undefined && Object.keys(u.setOnce).length > 0) ||
    u.unset.length > 0;
}

/**
 * Applies an update in PostHog's order: $set_once (only keys not present), then $set, then
 * $unset. Returns the new object, or undefined when nothing changed (so no write is needed).
 */
export function applyPersonUpdate(current: Properties, update: PersonUpdate): Properties | undefined {
  // Copied at the first change; `view` is what the update sees so far. (No helper closures: made
  // per call, their optimised code would not outlive a major GC — batch-codec.ts.) Keys are own
  // properties only: "constructor" or "__proto__" are keys like any other, as JSON.parse made them.
  let next: Properties | undefined;
  let view = current;
  if (update.setOnce) {
    for (const [key, value] of Object.entries(update.setOnce)) {
      if (Object.hasOwn(view, key) && view[key] !== undefined) continue;
      view = next ??= { ...current };
      setKey(next, key, value);
    }
  }
  if (update.set) {
    for (const [key, value] of Object.entries(update.set)) {
      if (Object.hasOwn(view, key) && sameJson(view[key], value)) continue;
      view = next ??= { ...current };
      setKey(next, key, value);
    }
  }
  for (const key of update.unset) {
    if (!Object.hasOwn(view, key)) continue;
    view = next ??= { ...current };
    delete next[key];
  }
  return next;
}

/** `target[key] = value`, except that "__proto__" becomes a key, not the object's prototype. */
function setKey(target: Properties, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  else target[key] = value;
}

/**
 * Object.assign for properties that came from JSON: a "__proto__" key of `source` (JSON.parse
 * makes it an own key, as it is in the bytes) stays a key of `target`. Object.assign would make
 * it `target`'s prototype instead: the key gone from what is serialised, and its value's members
 * seen as properties of `target` by every read.
 */
export function assignKeys(target: Properties, source: Readonly<Properties>): Properties {
  for (const key of Object.keys(source)) setKey(target, key, source[key]);
  return target;
}

/** Equality of JSON values (person properties come from JSON on both sides). */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Events that never update persons (reference §6). */
export const NO_PERSON_UPDATE_EVENTS = new Set(['$exception', '$$heatmap']);

/** Events that only make sense with a person; dropped when person processing is off. */
export const PERSON_ONLY_EVENTS = new Set(['$identify', '$create_alias', '$merge_dangerously', '$groupidentify']);

export const SURVEY_EVENTS = new Set(['survey sent', 'survey shown', 'survey dismissed']);

/** The property an event kind needs (spec, "Events"); missing → stored anyway, with a warning. */
export function requiredPropertyOf(event: string): string | undefined {
  if (event === '$pageview') return '$current_url';
  if (event === '$screen') return '$screen_name';
  if (SURVEY_EVENTS.has(event)) return '$survey_id';
  return undefined;
}

export function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

export type PersonMode = 'full' | 'personless';

export interface NormalizedEvent {
  event: CapturedEvent;
  mode: PersonMode;
  /** `$process_person_profile` was present but not a boolean: processed with a person, and warned. */
  invalidPersonMode: boolean;
  /** Normalisation changed the line (so it must be serialised again, not spliced). */
  changed: boolean;
}

/**
 * Normalises a captured line in place: the top-level `$set` / `$set_once` are merged over
 * `properties.$set` / `properties.$set_once` (the top level wins) and removed from the top level,
 * so PROCESSED carries person updates in one place. Personless events lose every person update.
 */
export function normalizeEvent(event: CapturedEvent): NormalizedEvent {
  let changed = !isPlainObject(event.properties);
  const props: Properties = isPlainObject(event.properties) ? event.properties : {};
  event.properties = props;
  for (const key of ['$set', '$set_once'] as const) {
    const top = event[key];
    if (top === undefined) continue;
    changed = true;
    if (isPlainObject(top)) {
      const inner = isPlainObject(props[key]) ? props[key] : {};
      props[key] = { ...inner, ...top };
    }
    delete event[key];
  }
  const flag = props.$process_person_profile;
  const mode: PersonMode = flag === false ? 'personless' : 'full';
  if (mode === 'personless' && (props.$set !== undefined || props.$set_once !== undefined || props.$unset !== undefined)) {
    delete props.$set;
    delete props.$set_once;
    delete props.$unset;
    changed = true;
  }
  return { event, mode, invalidPersonMode: flag !== undefined && typeof flag !== 'boolean', changed };
}

/** A distinct id given as a property (alias, $anon_distinct_id): strings as is, other scalars stringified. */
export function distinctIdProperty(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  // Objects become "[object Object]", which is on the illegal list: PostHog does the same.
  return '[object Object]';
}
