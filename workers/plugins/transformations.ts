// Transformations (docs/plugins.md, "Transformations"): the event hook that runs, on each batch
// of the persons role, before person processing, the processEvent of every enabled config of the
// events' project, in `order`, each on the batch's events of that project at once (one sandbox
// call). Returning the event (changed or not) lets it go on; null drops it (counted); a throw, a
// timeout, a change of team_id or a result that cannot be an event leave the event as it was
// before that plugin, with an ERROR naming the plugin and the event (a uuid that is not a UUID
// too: the batch would refuse the event, and a refused event is isolated as poison). So does a
// failure of the runtime itself on a plugin's batch (a plugin can provoke one: it shares the
// prelude's realm and can forge the result string). An event the plugins made too large for a
// PROCESSED message (the batch measures its bytes) goes on as it was before the transformations,
// the plugins blamed by the bytes each change added (unchanged). Each event records the plugins
// whose outcome it carries in $plugins_succeeded and those that failed or whose change it lost in
// $plugins_failed (omitted only when they do not fit); each plugin's outcomes are counted
// (metrics, breaker) once the batch took them.
//
// Replays: the hook runs again whenever a batch does (retries, replays after a crash, the trials
// that isolate a poison event). What the runtime decides is the same each time (order, lists,
// limits); what a plugin computes is the same when its code is (no Math.random, Date, fetch,
// cache or storage in processEvent): docs/plugins.md, "Replays", says what differs otherwise.
import { isUuid, type CapturedEvent, type Logger } from '../../lib/index.js';
import { errorText, HookedEventTooLargeError, type BeforePersonsHook, type HookBatch } from '../coordination/index.js';
import type { PluginCatalog } from './catalog.js';
import type { PluginInstance } from './instance.js';
import type { PluginMetrics } from './metrics.js';
import type { EventOutcome, SandboxEvent } from './sandbox/index.js';

/** Fields of a captured event a plugin may not change (the plugin sees team_id for the project). */
const FIXED_TOP = new Set(['team_id', 'token', 'project_id']);

interface Working {
  /** Index in the hook's batch. */
  index: number;
  /** The event as the plugins so far left it (the captured one until one changes it). */
  view: SandboxEvent & Record<string, unknown>;
  /** Properties added that the captured event did not have (the cheap path), while `changed` is false. */
  added: Record<string, unknown> | undefined;
  changed: boolean;
  dropped: boolean;
  succeeded: string[];
  /** Made when first needed, as `changedBy` is (most events need neither). */
  failed: string[] | undefined;
  /** The plugins that ran on it since it became `changed` (what its replacement owes to them). */
  changedBy: PluginInstance[] | undefined;
  /** Every plugin whose change it carries, in order (what a refusal discards, and blame for its size). */
  changes: Change[] | undefined;
}

/**
 * One plugin's change to an event: the event before it and after it, or (`after` undefined: the
 * last plugin's additions, only recorded) the properties it added. What it added to the line is
 * measured from these only when the event turned out too large (growths).
 */
interface Change {
  instance: PluginInstance;
  before: Working['view'];
  after: Working['view'] | undefined;
  added: ReadonlyArray<readonly [string, unknown]>;
}

/** One plugin's outcomes on a project's events of the batch, counted once the batch took them. */
interface Tally {
  ok: number;
  changed: number;
  dropped: number;
  failed: number;
  timedOut: number;
  /** Changes discarded with another plugin's that made the event too large or unprocessable (not this plugin's failure). */
  skipped: number;
}

type Tallies = Map<PluginInstance, Tally>;

function tallyOf(tallies: Tallies, instance: PluginInstance): Tally {
  let t = tallies.get(instance);
  if (!t) tallies.set(instance, (t = { ok: 0, changed: 0, dropped: 0, failed: 0, timedOut: 0, skipped: 0 }));
  return t;
}

export interface TransformationOptions {
  /**
   * Largest change a plugin may make to one event, in characters of its result (a whole event's
   * for a new object): a first, cheap bound, max_payload (a character is a byte or more, so a
   * larger one could never fit); the batch refuses an event whose bytes would not fit.
   */
  maxChangeChars: () => number;
}

function describe(event: SandboxEvent): string {
  const e = event as Partial<CapturedEvent>;
  return `event ${String(e.uuid)} (${JSON.stringify(String(e.event)).slice(0, 200)})`;
}

function notUuid(uuid: unknown): string {
  return `set uuid to ${JSON.stringify(String(uuid).slice(0, 100))}, which is not a UUID`;
}

/** The captured event again from what a plugin returned as a whole; a message when it cannot be one. */
function capturedFrom(result: unknown, original: CapturedEvent, teamId: number): CapturedEvent | string {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return 'returned something that is not an event';
  const r = result as Record<string, unknown>;
  if (r.team_id !== undefined && r.team_id !== teamId) return `changed team_id to ${JSON.stringify(r.team_id)}: the team of an event cannot be changed`;
  for (const field of ['uuid', 'event', 'distinct_id', 'timestamp'] as const) {
    if (typeof r[field] !== 'string' || r[field] === '') return `returned an event without a ${field}`;
  }
  if (!isUuid(r.uuid)) return notUuid(r.uuid);
  if (typeof r.properties !== 'object' || r.properties === null || Array.isArray(r.properties)) return 'returned an event whose properties are not an object';
  const { team_id: _team, ...rest } = r;
  return { ...rest, token: original.token, project_id: original.project_id } as unknown as CapturedEvent;
}

/**
 * Applies a patch to the working event; a message when it may not be applied. `needView`: whether a
 * plugin after this one needs the event as changed (the last one's additions are only recorded).
 */
function applyPatch(w: Working, patch: Extract<EventOutcome, { kind: 'patch' }>, original: CapturedEvent, needView: boolean): string | undefined {
  for (const [key] of patch.top) if (FIXED_TOP.has(key)) return `changed ${key}: the ${key === 'team_id' ? 'team of an event' : `${key} of an event`} cannot be changed`;
  for (const key of patch.topDeleted) if (FIXED_TOP.has(key) || key === 'uuid' || key === 'event' || key === 'distinct_id') return `deleted ${key}, which an event needs`;
  if (patch.replaced !== undefined && (typeof patch.replaced !== 'object' || patch.replaced === null || Array.isArray(patch.replaced))) return 'set properties to something that is not an object';
  const additive = patch.top.length === 0 && patch.topDeleted.length === 0 && patch.propertiesDeleted.length === 0 && patch.replaced === undefined &&
    patch.properties.every(([k, v]) => v !== undefined && !Object.hasOwn(original.properties, k));
  if (additive && !w.changed && !needView) {
    w.added ??= {};
    for (const [k, v] of patch.properties) w.added[k] = v;
    return undefined;
  }
  const properties = { ...(patch.replaced ?? w.view.properties) };
  for (const [k, v] of patch.properties) {
    if (v === undefined) delete properties[k];
    else properties[k] = v;
  }
  for (const k of patch.propertiesDeleted) delete properties[k];
  const view: Record<string, unknown> = { ...w.view, properties };
  for (const [k, v] of patch.top) {
    if (v === undefined) delete view[k];
    else view[k] = v;
  }
  for (const k of patch.topDeleted) delete view[k];
  for (const field of ['uuid', 'event', 'distinct_id', 'timestamp'] as const) {
    if (typeof view[field] !== 'string' || view[field] === '') return `set ${field} to something that is not a non-empty string`;
  }
  if (!isUuid(view.uuid)) return notUuid(view.uuid);
  w.view = view as Working['view'];
  if (additive && !w.changed) {
    w.added ??= {};
    for (const [k, v] of patch.properties) w.added[k] = v;
  } else {
    w.changed = true;
  }
  return undefined;
}

export function transformationHook(catalog: PluginCatalog, metrics: PluginMetrics, options: TransformationOptions, logger: Logger): BeforePersonsHook {
  const listsOmitted: ListsOmitted = (event, err) => {
    metrics.listsOmitted.inc();
    logger.warn({ uuid: event.uuid, bytes: err.bytes, room: err.room }, 'an event goes on without $plugins_succeeded / $plugins_failed: no room for them in a PROCESSED message');
  };
  return async (batch: HookBatch) => {
    if (catalog.noTransformations) return;
    const byProject = new Map<number, number[]>();
    for (let i = 0; i < batch.events.length; i++) {
      const projectId = batch.events[i]!.projectId;
      if (!catalog.transformations(projectId)) continue;
      let list = byProject.get(projectId);
      if (!list) byProject.set(projectId, (list = []));
      list.push(i);
    }
    for (const [teamId, indexes] of byProject) {
      const configs = catalog.transformations(teamId);
      if (!configs) continue;
      const working: Working[] = indexes.map((index) => ({
        index,
        view: batch.events[index]!.event,
        added: undefined,
        changed: false,
        dropped: false,
        succeeded: [],
        failed: undefined,
        changedBy: undefined,
        changes: undefined,
      }));
      const tallies: Tallies = new Map();
      for (const [at, entry] of configs.entries()) {
        const instance = catalog.acquire(teamId, entry);
        await runOne(instance, teamId, working, batch, metrics, options, at < configs.length - 1, tallies).catch((err: unknown) => {
          // The runtime failed on this plugin's batch: a plugin can cause it (it shares the
          // prelude's realm, and can forge the result string), so it is the plugin's failure.
          logger.warn({ err: errorText(err), configId: entry.id }, 'running a transformation failed');
          const live = working.filter((w) => !w.dropped);
          for (const w of live) failedOn(w, instance);
          if (live.length === 0) return;
          const more = live.length === 1 ? '' : ` and ${live.length - 1} more`;
          instance.log('PLUGIN', 'ERROR', `processEvent failed in the plugin runtime (${errorText(err)}) on ${describe(live[0]!.view)}${more}: the events go on as they were before this plugin`);
          tallyOf(tallies, instance).failed += live.length;
        });
      }
      finish(working, batch, tallies, listsOmitted);
      count(tallies, metrics);
    }
  };
}

function failedOn(w: Working, instance: PluginInstance): void {
  (w.failed ??= []).push(instance.label);
}

/** Each plugin's outcomes, in its breaker and the metrics. */
function count(tallies: Tallies, metrics: PluginMetrics): void {
  for (const [instance, t] of tallies) {
    instance.record(t.ok + t.changed + t.dropped, t.failed, t.timedOut);
    if (t.ok > 0) metrics.events.inc({ method: 'processEvent', outcome: 'ok' }, t.ok);
    if (t.changed > 0) metrics.events.inc({ method: 'processEvent', outcome: 'changed' }, t.changed);
    if (t.dropped > 0) metrics.events.inc({ method: 'processEvent', outcome: 'dropped' }, t.dropped);
    if (t.failed > 0) metrics.events.inc({ method: 'processEvent', outcome: 'failed' }, t.failed);
    if (t.timedOut > 0) metrics.events.inc({ method: 'processEvent', outcome: 'timeout' }, t.timedOut);
    if (t.skipped > 0) metrics.events.inc({ method: 'processEvent', outcome: 'skipped' }, t.skipped);
  }
}

async function runOne(
  instance: PluginInstance,
  teamId: number,
  working: Working[],
  batch: HookBatch,
  metrics: PluginMetrics,
  options: TransformationOptions,
  more: boolean,
  tallies: Tallies,
): Promise<void> {
  const live = working.filter((w) => !w.dropped);
  if (live.length === 0) return;
  if (!(await instance.ready()) || !instance.has('processEvent')) {
    if (instance.state === 'ready') return; // loaded, but exports no processEvent: not a transformation
    for (const w of live) failedOn(w, instance);
    metrics.events.inc({ method: 'processEvent', outcome: 'skipped' }, live.length);
    return;
  }
  const started = performance.now();
  const outcomes = await instance.runBatch('processEvent', 'event', { teamId, events: live.map((w) => w.view) });
  metrics.batchSeconds.observe({ method: 'processEvent' }, (performance.now() - started) / 1000);
  if (!outcomes) {
    for (const w of live) failedOn(w, instance);
    metrics.events.inc({ method: 'processEvent', outcome: 'skipped' }, live.length);
    return;
  }
  const tally = tallyOf(tallies, instance);
  const touched = new Set<number>();
  const fail = (w: Working, message: string) => {
    failedOn(w, instance);
    instance.log('PLUGIN', 'ERROR', `processEvent ${message} on ${describe(w.view)}: the event goes on as it was before this plugin`);
  };
  const maxChange = options.maxChangeChars();
  for (const o of outcomes) {
    const w = live[o.index]!;
    touched.add(o.index);
    const original = batch.events[w.index]!.event;
    switch (o.kind) {
      case 'timeout':
        tally.timedOut++;
        fail(w, o.message);
        break;
      case 'error':
        tally.failed++;
        fail(w, `threw ${o.name}: ${o.message}`);
        break;
      case 'null':
        tally.dropped++;
        w.dropped = true;
        break;
      case 'patch': {
        const before = w.view;
        const problem = o.size > maxChange ? `returned a change of ${o.size} characters (at most ${maxChange})` : applyPatch(w, o, original, more);
        if (problem) {
          tally.failed++;
          fail(w, problem);
        } else {
          tally.changed++;
          w.succeeded.push(instance.label);
          (w.changes ??= []).push({ instance, before, after: w.view === before ? undefined : w.view, added: o.properties });
          if (w.changed) (w.changedBy ??= []).push(instance);
        }
        break;
      }
      case 'result': {
        const result = o.size > maxChange ? `returned an event of ${o.size} characters (at most ${maxChange})` : capturedFrom(o.value, original, teamId);
        if (typeof result === 'string') {
          tally.failed++;
          fail(w, result);
        } else {
          tally.changed++;
          const before = w.view;
          w.view = { ...result, team_id: teamId };
          w.changed = true;
          w.added = undefined;
          w.succeeded.push(instance.label);
          (w.changes ??= []).push({ instance, before, after: w.view, added: [] });
          (w.changedBy ??= []).push(instance);
        }
        break;
      }
    }
  }
  for (let i = 0; i < live.length; i++) if (!touched.has(i)) live[i]!.succeeded.push(instance.label);
  tally.ok += live.length - touched.size;
}

/**
 * The events as the plugins left them, with $plugins_succeeded / $plugins_failed, back in the batch.
 * An event too large with the lists goes on without them when its changes fit alone (the lists
 * are the runtime's, not a plugin's change); else as captured (unchanged).
 */
function finish(working: Working[], batch: HookBatch, tallies: Tallies, listsOmitted: ListsOmitted): void {
  // Most events share one outcome: one lists object (and one JSON of it) for all of them.
  const shared = new Map<string, Record<string, unknown>>();
  let everyOne: Record<string, unknown> | undefined;
  let most = 0;
  for (const w of working) most = Math.max(most, w.succeeded.length);
  for (const w of working) {
    if (w.dropped) {
      batch.drop(w.index);
      continue;
    }
    let lists: Record<string, unknown> | undefined;
    if (!w.failed && w.succeeded.length === most) lists = everyOne ??= { $plugins_succeeded: w.succeeded };
    else {
      const key = `${w.succeeded.join('\u0000')}\u0001${w.failed?.join('\u0000') ?? ''}`;
      lists = shared.get(key);
      if (!lists) {
        lists = { $plugins_succeeded: w.succeeded };
        if (w.failed) lists.$plugins_failed = w.failed;
        shared.set(key, lists);
      }
    }
    try {
      put(w, batch, lists);
    } catch (err) {
      if (!(err instanceof HookedEventTooLargeError) || !put(w, batch, undefined, true)) unchanged(w, batch, err, tallies, listsOmitted);
      else listsOmitted(batch.events[w.index]!.event, err);
    }
  }
}

/**
 * Puts the event as the plugins left it, with `lists` when given, back in the batch. `quiet`:
 * false instead of the batch's refusal.
 */
function put(w: Working, batch: HookBatch, lists: Record<string, unknown> | undefined, quiet = false): boolean {
  try {
    if (w.changed) {
      const { team_id: _team, ...view } = w.view as Record<string, unknown>;
      const original = batch.events[w.index]!.event;
      const event = { ...view, token: original.token, project_id: original.project_id, properties: { ...(view.properties as object), ...lists } };
      batch.replace(w.index, event as unknown as CapturedEvent);
    } else {
      const added = lists && w.added ? { ...w.added, ...lists } : (lists ?? w.added);
      if (added) batch.addProperties(w.index, added);
    }
    return true;
  } catch (err) {
    if (quiet) return false;
    throw err;
  }
}

/** Told when an event goes on without its lists: even without them it has no room for them. */
type ListsOmitted = (event: CapturedEvent, err: HookedEventTooLargeError) => void;

/** A share of what the plugins added this large or larger makes a plugin one that made the event too large. */
const BLAMED_SHARE = 0.1;

/**
 * The bytes each change added to the event's line (negative: removed), measured from the JSON of
 * the event before and after it (as the batch writes it, without team_id). Only for an event
 * found too large: it serialises the event once per change.
 */
function growths(changes: readonly Change[]): Map<PluginInstance, number> {
  const sizes = new Map<object, number>();
  const bytesOf = (view: Working['view']) => {
    let n = sizes.get(view);
    if (n === undefined) sizes.set(view, (n = Buffer.byteLength(JSON.stringify({ ...view, team_id: undefined }))));
    return n;
  };
  const grown = new Map<PluginInstance, number>();
  for (const c of changes) {
    const after = c.after ?? { ...c.before, properties: { ...c.before.properties, ...Object.fromEntries(c.added) } };
    grown.set(c.instance, bytesOf(after) - bytesOf(c.before));
  }
  return grown;
}

/**
 * A changed event the batch refused (what the checks above let through, and processing does not
 * take, or too large for a PROCESSED message): it goes on as captured. Every plugin whose change
 * it so loses is listed in $plugins_failed (the event does not carry its change). Those that made
 * it so get an ERROR and count as failed (metrics, breaker): too large, each whose change added a
 * tenth or more of the bytes the plugins added (never the captured size: one that added a
 * property beside a plugin that added a megabyte is not to blame); else the plugins that changed
 * it as a whole. The others get a WARN and count as skipped. Never the batch's failure: a refused
 * event would be isolated as poison, a bisection of the shard.
 */
function unchanged(w: Working, batch: HookBatch, err: unknown, tallies: Tallies, listsOmitted: ListsOmitted): void {
  const event = batch.events[w.index]!.event;
  const changes = w.changes ?? [];
  let blamed: Set<PluginInstance>;
  let why: (instance: PluginInstance) => string;
  if (err instanceof HookedEventTooLargeError) {
    const grown = growths(changes);
    let total = 0;
    for (const bytes of grown.values()) total += Math.max(0, bytes);
    blamed = new Set(changes.filter((c) => grown.get(c.instance)! > 0 && grown.get(c.instance)! >= total * BLAMED_SHARE).map((c) => c.instance));
    why = (i) => `made ${describe(event)} ${err.bytes} bytes long as JSON (its change added ${grown.get(i)}), more than the ${err.room} an event may take in a PROCESSED message`;
  } else {
    blamed = new Set(w.changedBy ?? []);
    const reason = `changed ${describe(event)} into one that cannot be processed (${errorText(err)})`;
    why = () => reason;
  }
  const lost = changes.map((c) => c.instance);
  const labels = new Set(lost.map((i) => i.label));
  const lists: Record<string, unknown> = { $plugins_succeeded: w.succeeded.filter((l) => !labels.has(l)), $plugins_failed: [...(w.failed ?? []), ...labels] };
  const culprits = [...blamed].map((i) => i.label).join(', ');
  for (const instance of lost) {
    const tally = tallyOf(tallies, instance);
    tally.changed--;
    if (blamed.has(instance)) {
      instance.log('PLUGIN', 'ERROR', `processEvent ${why(instance)}: the event goes on as it was before the transformations`);
      tally.failed++;
    } else {
      instance.log('PLUGIN', 'WARN', `processEvent's change to ${describe(event)} is discarded: ${culprits || 'the transformations'} made the event one that cannot be processed (${errorText(err)}); it goes on as it was before the transformations`);
      tally.skipped++;
    }
  }
  try {
    batch.addProperties(w.index, lists);
  } catch (refused) {
    // The captured event itself leaves no room for the lists: it goes on exactly as captured.
    if (refused instanceof HookedEventTooLargeError) listsOmitted(event, refused);
  }
}
