// What the plugin delivery benchmark delivers (bench/plugins/delivery.ts): processed events of
// one project as the persons role writes them (~430 bytes, like the worker benchmark's mix), and
// the destinations that deliver them, each with the requests a ceiling sends for the same events
// (what the plugin's requests would be, straight to the destination).

import { processedWebEvent } from '../lib/processed-event.js';

export const TEAM = 1;

/** Event `i` on PROCESSED: deterministic, so the ceiling builds the same requests. */
export function processedEvent(i: number): Record<string, unknown> {
  const at = new Date(Date.UTC(2026, 10, 28, 12) + i * 7).toISOString();
  return processedWebEvent(i, at, at, TEAM);
}

/** The event as a plugin sees it (workers/plugins/sandbox/columns.ts): no token, team_id. */
function pluginView(e: Record<string, unknown>): Record<string, unknown> {
  const { token: _token, project_id: _project, ...rest } = e;
  return { ...rest, team_id: TEAM };
}

export interface BenchRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface DeliveryCase {
  name: string;
  /** The plugin (index.ts); `config.url` is the sink. */
  source: string;
  /** The requests the plugin makes for events [0, n), sent straight by the ceiling. */
  requests(n: number): BenchRequest[];
}

const JSON_HEADERS = { 'content-type': 'application/json' };
/** Events per request of the batching onEvent: PLUGIN_DELIVERY_BATCH's default, one sandbox call. */
const ON_EVENT_BATCH = 500;

export const DELIVERY_CASES: readonly DeliveryCase[] = [
  {
    name: 'composeWebhook: the event as JSON, one request per event',
    source: "export function composeWebhook(event, { config }) { return { url: config.url + '/e', body: JSON.stringify(event) } }",
    requests: (n) => Array.from({ length: n }, (_, i) => ({ path: '/e', headers: JSON_HEADERS, body: JSON.stringify(pluginView(processedEvent(i))) })),
  },
  {
    name: 'composeWebhook: four fields, one request per event',
    source:
      "export function composeWebhook(event, { config }) { return { url: config.url + '/e', body: JSON.stringify({ uuid: event.uuid, event: event.event, distinct_id: event.distinct_id, timestamp: event.timestamp }) } }",
    requests: (n) =>
      Array.from({ length: n }, (_, i) => {
        const e = processedEvent(i);
        return { path: '/e', headers: JSON_HEADERS, body: JSON.stringify({ uuid: e.uuid, event: e.event, distinct_id: e.distinct_id, timestamp: e.timestamp }) };
      }),
  },
  {
    name: 'onEvent: batched through fetch, one request per sandbox call',
    source: `export async function onEvent(event, { config, global }) {
      if (!global.pending) {
        global.pending = []
        global.flush = Promise.resolve().then(async () => {
          const events = global.pending
          global.pending = null
          const res = await fetch(config.url + '/batch', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Events': String(events.length) }, body: JSON.stringify(events) })
          if (!res.ok) throw new RetryError('the sink answered ' + res.status)
        })
      }
      global.pending.push(event)
      await global.flush
    }`,
    requests: (n) => {
      const out: BenchRequest[] = [];
      for (let i = 0; i < n; i += ON_EVENT_BATCH) {
        const events = Array.from({ length: Math.min(ON_EVENT_BATCH, n - i) }, (_, k) => pluginView(processedEvent(i + k)));
        out.push({ path: '/batch', headers: { ...JSON_HEADERS, 'x-events': String(events.length) }, body: JSON.stringify(events) });
      }
      return out;
    },
  },
];
