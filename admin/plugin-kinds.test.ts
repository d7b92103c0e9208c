import { describe, expect, it } from 'vitest';
import { capabilitiesFit, DEFAULT_CAPABILITIES, kindsOf, PLUGIN_KINDS } from './plugin-kinds.js';

describe('plugin kinds', () => {
  it('plugin kinds - capabilities decide the collections, as PostHog lists them', () => {
    expect(kindsOf({ methods: ['processEvent'] })).toEqual(['transformation']);
    expect(kindsOf({ methods: ['onEvent'] })).toEqual(['destination']);
    expect(kindsOf({ methods: ['composeWebhook'] })).toEqual(['destination']);
    expect(kindsOf({})).toEqual(['frontend_app']);
    expect(kindsOf({ jobs: ['x'] })).toEqual(['frontend_app']);
    expect(kindsOf({ scheduled_tasks: ['runEveryHour'] })).toEqual(['import_app']);
    expect(kindsOf({ methods: ['setupPlugin'] })).toEqual(['import_app']);
    expect(kindsOf({ methods: [] })).toEqual(['import_app']);
    expect(kindsOf({ scheduled_tasks: [] })).toEqual([]);
    expect(kindsOf({ methods: ['processEvent', 'onEvent'] })).toEqual(['transformation', 'destination']);
  });

  it('plugin kinds - every collection’s default capabilities fit it', () => {
    for (const kind of Object.values(PLUGIN_KINDS)) expect(capabilitiesFit(kind, DEFAULT_CAPABILITIES[kind]), kind).toBe(true);
    expect(capabilitiesFit('transformation', { methods: ['onEvent'] })).toBe(false);
  });
});
