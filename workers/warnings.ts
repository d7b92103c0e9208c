// Ingestion warnings: stored per project in `ingestion_warnings` (type, details, time) and counted
// in /metrics. The first three types are PostHog's names (reference §6); the rest are Spate's.
export const WARNING_TYPES = [
  'cannot_merge_with_illegal_distinct_id',
  'cannot_merge_already_identified',
  'invalid_event_when_process_person_profile_is_false',
  'invalid_process_person_profile',
  'missing_required_property',
  'invalid_group_key',
  'invalid_group_set',
  'group_type_limit_reached',
  'invalid_event',
] as const;

export type WarningType = (typeof WARNING_TYPES)[number];
