// How large one JetStream message may be: decided here and nowhere else. The line packer cuts a
// request's lines into segments that fit (parse/), and the publisher coalesces segments of one
// subject into a message while they fit (publish/); both ask `fitsInMessage`.
import { MAX_GROUPS_GROWTH, PERSON_ID_TAIL } from '../lib/index.js';

/** Room for headers (Nats-Msg-Id, Spate-Events) inside the server's max_payload. */
export const HEADER_ALLOWANCE = 1024;

/**
 * Room for what a worker adds to the largest line before publishing it to PROCESSED, alone in a
 * message under the same max_payload: `person_id` and `$group_N` (lib/processed-growth.ts). Without
 * it, an event ingest answered 200 for could be one PROCESSED can never take.
 */
export const PROCESSING_ALLOWANCE = PERSON_ID_TAIL + MAX_GROUPS_GROWTH;

/** The least room for events: a node whose limit is smaller would answer 413 to everything, so it does not start. */
export const MIN_EVENT_ROOM = 1024;

/** The server's max_payload leaves no room for events (a start-up error; PUBLISH_MAX_MESSAGE_BYTES's own minimum is a config error). */
export class NoRoomForEventsError extends Error {
  override name = 'NoRoomForEventsError';
}

/** PUBLISH_MAX_MESSAGE_BYTES, capped below what the server accepts (its max_payload less headers and processing). */
export function messageSizeLimit(configured: number, serverMaxPayload: number | undefined): number {
  const server = serverMaxPayload ?? 1024 * 1024;
  const room = server - HEADER_ALLOWANCE - PROCESSING_ALLOWANCE;
  if (room < MIN_EVENT_ROOM) {
    const least = HEADER_ALLOWANCE + PROCESSING_ALLOWANCE + MIN_EVENT_ROOM;
    throw new NoRoomForEventsError(`the NATS server's max_payload of ${server} bytes leaves no room for events: it must be at least ${least} (headers, what workers add to an event, 1 KiB of event)`);
  }
  return Math.min(configured, room);
}

/** Whether `bytes` of NDJSON lines go in one message under `limit` (from messageSizeLimit). */
export function fitsInMessage(bytes: number, limit: number): boolean {
  return bytes <= limit;
}
