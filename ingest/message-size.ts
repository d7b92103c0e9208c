// How large one JetStream message may be: decided here and nowhere else. The line packer cuts a
// request's lines into segments that fit (parse/), and the publisher coalesces segments of one
// subject into a message while they fit (publish/); both ask `fitsInMessage`.

/** Room for headers (Nats-Msg-Id, Spate-Events) inside the server's max_payload. */
export const HEADER_ALLOWANCE = 1024;

/** PUBLISH_MAX_MESSAGE_BYTES, capped below what the server accepts (its max_payload less headers). */
export function messageSizeLimit(configured: number, serverMaxPayload: number | undefined): number {
  return Math.min(configured, (serverMaxPayload ?? 1024 * 1024) - HEADER_ALLOWANCE);
}

/** Whether `bytes` of NDJSON lines go in one message under `limit` (from messageSizeLimit). */
export function fitsInMessage(bytes: number, limit: number): boolean {
  return bytes <= limit;
}
