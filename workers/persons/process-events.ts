// The effects of every event kind (spec "Events", reference §6), applied in stream order to a
// batch's in-memory workspace. Pure: the caller loads state before and writes it after.
import { groupKeyOf, isPlainObject, MAX_GROUP_KEY_LENGTH, type CapturedEvent, type ProcessedEvent, type Properties } from '../../lib/index.js';
import {
  NO_PERSON_UPDATE_EVENTS,
  PERSON_ONLY_EVENTS,
  applyPersonUpdate,
  distinctIdProperty,
  isIllegalDistinctId,
  isNonEmptyString,
  normalizeEvent,
  personUpdateOf,
  requiredPropertyOf,
} from './event-rules.js';
import type { PersonWorkspace } from './person-workspace.js';
import { PropertiesBudget } from './properties-size.js';
import type { WarningType } from './warnings.js';

export interface SourceEvent {
  /** Project of the subject the event came on (decides the output subject). */
  projectId: number;
  event: CapturedEvent;
}

export interface IngestionWarning {
  projectId: number;
  type: WarningType;
  details: Record<string, unknown>;
}

export interface GroupUpsert {
  projectId: number;
  groupTypeIndex: number;
  groupKey: string;
  /** `$group_set` of every event of the batch for this group, merged in order. */
  properties: Properties;
  createdAt: string;
}

export type EventKind =
  | 'custom'
  | 'identify'
  | 'create_alias'
  | 'merge_dangerously'
  | 'groupidentify'
  | 'personless'
  | 'dropped';

export interface ProcessResult {
  /** One entry per input event, in order; undefined when the event is dropped. */
  outputs: (ProcessedEvent | undefined)[];
  /** Per input event: true when the output is the captured line plus `person_id` only (it can be spliced, not re-serialised). */
  untouched: boolean[];
  warnings: IngestionWarning[];
  groups: GroupUpsert[];
  kinds: Map<EventKind, number>;
}

/** Group type → index of a project, resolved (and created, up to 5) before processing. */
export type GroupTypeLookup = (projectId: number, groupType: string) => number | undefined;

/** Distinct ids each event will ask the workspace about (load them before processing). */
export function distinctIdsToLoad(source: SourceEvent): string[] {
  const e = source.event;
  const props = isPlainObject(e.properties) ? e.properties : {};
  if (props.$process_person_profile === false) return [];
  const ids = [e.distinct_id];
  if (e.event === '$identify') {
    const anon = distinctIdProperty(props.$anon_distinct_id);
    if (anon !== undefined) ids.push(anon);
  } else if (e.event === '$create_alias' || e.event === '$merge_dangerously') {
    const alias = distinctIdProperty(props.alias);
    if (alias !== undefined) ids.push(alias);
  }
  return ids;
}

/** Group types each event refers to ($groups keys, $groupidentify's $group_type). */
export function groupTypesOf(source: SourceEvent): string[] {
  const props = source.event.properties;
  if (!isPlainObject(props)) return [];
  const types: string[] = [];
  if (isPlainObject(props.$groups)) types.push(...Object.keys(props.$groups));
  if (source.event.event === '$groupidentify' && isNonEmptyString(props.$group_type)) types.push(props.$group_type);
  return types;
}

export interface ProcessOptions {
  /** Largest person or group properties kept, in bytes of JSON (WORKER_MAX_PROPERTIES_BYTES). */
  maxPropertiesBytes: number;
}

const DEFAULT_OPTIONS: ProcessOptions = { maxPropertiesBytes: 512 * 1024 };

export function processEvents(
  events: readonly SourceEvent[],
  workspace: PersonWorkspace,
  groupTypeIndex: GroupTypeLookup,
  options: ProcessOptions = DEFAULT_OPTIONS,
): ProcessResult {
  const result: ProcessResult = { outputs: [], untouched: [], warnings: [], groups: [], kinds: new Map() };
  const personBudget = new PropertiesBudget(options.maxPropertiesBytes);
  const groupBudget = new PropertiesBudget(options.maxPropertiesBytes);
  const groups = new Map<string, GroupUpsert>();
  const count = (kind: EventKind) => result.kinds.set(kind, (result.kinds.get(kind) ?? 0) + 1);

  for (const source of events) {
    const { projectId } = source;
    const { event: e, mode, invalidPersonMode, changed } = normalizeEvent(source.event);
    const props = e.properties;
    const warn = (type: WarningType, details: Record<string, unknown>) =>
      result.warnings.push({ projectId, type, details: { eventUuid: e.uuid, event: e.event, distinctId: e.distinct_id, ...details } });

    if (invalidPersonMode) warn('invalid_process_person_profile', { value: props.$process_person_profile });
    const required = requiredPropertyOf(e.event);
    if (required !== undefined && !isNonEmptyString(props[required])) warn('missing_required_property', { property: required });

    if (mode === 'personless') {
      if (PERSON_ONLY_EVENTS.has(e.event)) {
        warn('invalid_event_when_process_person_profile_is_false', {});
        result.outputs.push(undefined);
        result.untouched.push(false);
        count('dropped');
        continue;
      }
      const grouped = attachGroups(props, projectId, groupTypeIndex);
      result.outputs.push(e);
      result.untouched.push(!changed && !grouped);
      count('personless');
      continue;
    }

    if (e.event === '$groupidentify' && props.$group_set !== undefined && !isPlainObject(props.$group_set)) {
      warn('invalid_group_set', { valueType: Array.isArray(props.$group_set) ? 'array' : typeof props.$group_set });
      result.outputs.push(undefined);
      result.untouched.push(false);
      count('dropped');
      continue;
    }

    let kind: EventKind = 'custom';
    if (e.event === '$identify') {
      kind = 'identify';
      const anon = distinctIdProperty(props.$anon_distinct_id);
      if (anon !== undefined) mergeIds(anon, e.distinct_id, 'source_identified');
    } else if (e.event === '$create_alias' || e.event === '$merge_dangerously') {
      kind = e.event === '$create_alias' ? 'create_alias' : 'merge_dangerously';
      const alias = distinctIdProperty(props.alias);
      if (alias === undefined || alias === '') warn('missing_required_property', { property: 'alias' });
      // $create_alias: the event's distinct id is merged into the alias (spec); $merge_dangerously
      // merges the alias into the distinct id, whatever either person is (reference §6).
      else if (kind === 'create_alias') mergeIds(e.distinct_id, alias, 'both_identified');
      else mergeIds(alias, e.distinct_id, 'never');
    } else if (e.event === '$groupidentify') {
      kind = 'groupidentify';
    }

    const person = workspace.getOrCreate(projectId, e.distinct_id, e.timestamp);
    if (kind === 'groupidentify') {
      delete props.$set;
      delete props.$set_once;
      delete props.$unset;
      upsertGroup(props, projectId, e, warn);
    } else if (!NO_PERSON_UPDATE_EVENTS.has(e.event)) {
      const update = personUpdateOf(props);
      const next = applyPersonUpdate(person.properties, update);
      if (next) {
        const size = personBudget.admits(person.uuid, person.properties, next, [update.set, update.setOnce]);
        if (size.ok) workspace.setProperties(person, next);
        else warn('person_properties_too_large', { personUuid: person.uuid, bytes: size.bytes, maxBytes: personBudget.maxBytes });
      }
    }
    if (kind === 'identify') workspace.markIdentified(person);

    const grouped = attachGroups(props, projectId, groupTypeIndex);
    (e as ProcessedEvent).person_id = person.uuid;
    result.outputs.push(e);
    result.untouched.push(!changed && !grouped && kind !== 'groupidentify');
    count(kind);

    /**
     * Links two distinct ids (reference §6 "Merge cases"). On refusal the event goes on with
     * the person of its own distinct id.
     */
    function mergeIds(sourceId: string, targetId: string, refuse: 'source_identified' | 'both_identified' | 'never'): void {
      if (sourceId === targetId) return;
      const illegal = [sourceId, targetId].find(isIllegalDistinctId);
      if (illegal !== undefined) {
        warn('cannot_merge_with_illegal_distinct_id', { illegalDistinctId: illegal, sourceDistinctId: sourceId, targetDistinctId: targetId });
        return;
      }
      const source = workspace.personOf(projectId, sourceId);
      const target = workspace.personOf(projectId, targetId);
      if (!source && !target) {
        const created = workspace.create(projectId, targetId, e.timestamp);
        workspace.addDistinctId(created, projectId, sourceId);
        workspace.markIdentified(created);
      } else if (source && !target) {
        workspace.addDistinctId(source, projectId, targetId);
        workspace.markIdentified(source);
      } else if (!source && target) {
        workspace.addDistinctId(target, projectId, sourceId);
        workspace.markIdentified(target);
      } else if (source && target && source.uuid !== target.uuid) {
        const refused =
          (refuse === 'source_identified' && source.isIdentified) ||
          (refuse === 'both_identified' && source.isIdentified && target.isIdentified);
        if (refused) {
          warn('cannot_merge_already_identified', { sourceDistinctId: sourceId, targetDistinctId: targetId });
          return;
        }
        workspace.merge(source, target);
        personBudget.forget(target.uuid);
      }
    }
  }

  function upsertGroup(
    props: Properties,
    projectId: number,
    e: CapturedEvent,
    warn: (type: WarningType, details: Record<string, unknown>) => void,
  ): void {
    const type = props.$group_type;
    if (!isNonEmptyString(type)) return warn('missing_required_property', { property: '$group_type' });
    const key = groupKeyOf(props.$group_key);
    if (key === undefined) return warn('missing_required_property', { property: '$group_key' });
    if (key.length > MAX_GROUP_KEY_LENGTH) {
      return warn('invalid_group_key', { groupType: type, length: key.length, maxLength: MAX_GROUP_KEY_LENGTH });
    }
    const index = groupTypeIndex(projectId, type);
    if (index === undefined) return warn('group_type_limit_reached', { groupType: type });
    const id = `${projectId}:${index}:${key}`;
    let upsert = groups.get(id);
    if (!upsert) groups.set(id, (upsert = { projectId, groupTypeIndex: index, groupKey: key, properties: {}, createdAt: e.timestamp }));
    if (!isPlainObject(props.$group_set)) return;
    // The batch's update of the group is capped here; what the row holds already, where it is merged (person-store.ts).
    const next = { ...upsert.properties, ...props.$group_set };
    const size = groupBudget.admits(id, upsert.properties, next, [props.$group_set]);
    if (size.ok) upsert.properties = next;
    else warn('group_properties_too_large', { groupType: type, groupKey: key, bytes: size.bytes, maxBytes: groupBudget.maxBytes });
  }

  // Sorted so that concurrent batches lock group rows in the same order.
  result.groups = [...groups.values()].sort(inLockOrder);
  return result;
}

/** The one order group rows are locked in, by every batch and writer (no deadlocks between them). */
export function inLockOrder(a: GroupUpsert, b: GroupUpsert): number {
  return a.projectId - b.projectId || a.groupTypeIndex - b.groupTypeIndex || (a.groupKey < b.groupKey ? -1 : a.groupKey > b.groupKey ? 1 : 0);
}

/** `$groups: {type: key}` → `$group_<index>: key` for types with an index; never creates a group. True when it added any. */
function attachGroups(props: Properties, projectId: number, groupTypeIndex: GroupTypeLookup): boolean {
  const groups = props.$groups;
  if (!isPlainObject(groups)) return false;
  let added = false;
  for (const [type, value] of Object.entries(groups)) {
    const key = groupKeyOf(value);
    if (key === undefined || key.length > MAX_GROUP_KEY_LENGTH) continue;
    const index = groupTypeIndex(projectId, type);
    if (index !== undefined) {
      props[`$group_${index}`] = key;
      added = true;
    }
  }
  return added;
}
