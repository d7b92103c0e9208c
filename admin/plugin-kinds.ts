// The four pipeline collections share one plugin record. A plugin belongs to the collection it
// was created in, and its `capabilities` must put it there by the rules PostHog's lists use:
//   transformations: capabilities.methods contains processEvent
//   destinations:    methods contains onEvent or composeWebhook
//   frontend apps:   neither a `methods` nor a `scheduled_tasks` key
//   import apps:     a non-empty scheduled_tasks, or methods without any of the three above

export const PLUGIN_KINDS = {
  pipeline_destinations: 'destination',
  pipeline_frontend_apps: 'frontend_app',
  pipeline_import_apps: 'import_app',
  pipeline_transformations: 'transformation',
} as const;

export type PluginCollection = keyof typeof PLUGIN_KINDS;
export type PluginKind = (typeof PLUGIN_KINDS)[PluginCollection];

export const PLUGIN_COLLECTIONS = Object.keys(PLUGIN_KINDS) as PluginCollection[];

/** Human names, for messages. */
export const KIND_NAMES: Readonly<Record<PluginKind, string>> = {
  destination: 'a destination',
  frontend_app: 'a frontend app',
  import_app: 'an import app',
  transformation: 'a transformation',
};

/** What a plugin created in a collection without capabilities gets. */
export const DEFAULT_CAPABILITIES: Readonly<Record<PluginKind, Record<string, unknown>>> = {
  destination: { methods: ['onEvent'] },
  frontend_app: {},
  import_app: { scheduled_tasks: ['runEveryMinute'] },
  transformation: { methods: ['processEvent'] },
};

function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;
}

/** Every collection whose list these capabilities put a plugin in (possibly several, or none). */
export function kindsOf(capabilities: Record<string, unknown>): PluginKind[] {
  const hasMethods = Object.hasOwn(capabilities, 'methods');
  const methods = stringList(capabilities.methods) ?? [];
  const scheduled = stringList(capabilities.scheduled_tasks) ?? [];
  const kinds: PluginKind[] = [];
  if (hasMethods && methods.includes('processEvent')) kinds.push('transformation');
  if (hasMethods && (methods.includes('onEvent') || methods.includes('composeWebhook'))) kinds.push('destination');
  if (!hasMethods && !Object.hasOwn(capabilities, 'scheduled_tasks')) kinds.push('frontend_app');
  const plainMethods = hasMethods && !['onEvent', 'composeWebhook', 'processEvent'].some((m) => methods.includes(m));
  if (scheduled.length > 0 || plainMethods) kinds.push('import_app');
  return kinds;
}

export function capabilitiesFit(kind: PluginKind, capabilities: Record<string, unknown>): boolean {
  return kindsOf(capabilities).includes(kind);
}
