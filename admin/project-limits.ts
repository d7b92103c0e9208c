// Per-project capture limits: each project may set its own (the API fields below, by an admin
// of its organization); the cluster's settings (PROJECT_*) are both the default of a project that
// sets none and the most any project may set, so organizations can tighten their projects'
// limits but only the operator can loosen them. The admin server writes the limits that apply
// into the project's spate-projects record; ingest nodes enforce them, each on its own.
import type { ProjectLimits } from '../lib/index.js';
import { apiError } from './errors.js';

/** The project's columns (null: the cluster default). */
export interface ProjectLimitColumns {
  capture_events_per_second: number | null;
  capture_events_per_day: number | null;
  historical_messages_per_second: number | null;
}

/** The cluster's settings: default and ceiling of each limit (0: no limit). */
export interface ProjectLimitSettings {
  eventsPerSecond: number;
  eventsPerDay: number;
  historicalMessagesPerSecond: number;
}

export const LIMIT_FIELDS = {
  capture_events_per_second: { setting: 'eventsPerSecond', env: 'PROJECT_EVENTS_PER_SECOND', record: 'eventsPerSecond' },
  capture_events_per_day: { setting: 'eventsPerDay', env: 'PROJECT_EVENTS_PER_DAY', record: 'eventsPerDay' },
  historical_messages_per_second: { setting: 'historicalMessagesPerSecond', env: 'PROJECT_HISTORICAL_MESSAGES_PER_SECOND', record: 'historicalMessagesPerSecond' },
} as const satisfies Record<keyof ProjectLimitColumns, { setting: keyof ProjectLimitSettings; env: string; record: keyof ProjectLimits }>;

/** The limits that apply to the project (undefined: none), as its spate-projects record carries them. */
export function effectiveLimits(project: ProjectLimitColumns, settings: ProjectLimitSettings): ProjectLimits | undefined {
  const limits: ProjectLimits = {};
  for (const [field, { setting, record }] of Object.entries(LIMIT_FIELDS) as Array<[keyof ProjectLimitColumns, (typeof LIMIT_FIELDS)[keyof ProjectLimitColumns]]>) {
    const ceiling = settings[setting];
    const own = project[field];
    const value = own === null ? ceiling : ceiling > 0 ? Math.min(own, ceiling) : own;
    if (value > 0) limits[record] = value;
  }
  return Object.keys(limits).length > 0 ? limits : undefined;
}

/** Refuses a value above the cluster's ceiling (400 on the field, in DRF's max_value wording). */
export function checkLimitFields(fields: Partial<ProjectLimitColumns>, settings: ProjectLimitSettings): void {
  for (const [field, { setting }] of Object.entries(LIMIT_FIELDS) as Array<[keyof ProjectLimitColumns, (typeof LIMIT_FIELDS)[keyof ProjectLimitColumns]]>) {
    const value = fields[field];
    const ceiling = settings[setting];
    if (value !== undefined && value !== null && ceiling > 0 && value > ceiling) {
      throw apiError('validation_error', `Ensure this value is less than or equal to ${ceiling}.`, field);
    }
  }
}
