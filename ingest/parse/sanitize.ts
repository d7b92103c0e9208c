// Capture writes every event's line without NUL characters and lone surrogates (lib/sanitize.ts).
import { cleanStrings, hasHostileText } from '../../lib/index.js';

/**
 * The event's NDJSON line without its newline (the packer writes that byte: appending it here
 * would make a second string to flatten), with hostile strings replaced (rare: only then is
 * anything copied).
 */
export function eventJson(event: object): string {
  const json = JSON.stringify(event);
  return hasHostileText(json) ? JSON.stringify(cleanStrings(event)) : json;
}
