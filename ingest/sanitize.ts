// Strings that JSON allows but PostgreSQL (and many other consumers) refuse: NUL characters and
// unpaired UTF-16 surrogates. Downstream, one such event would fail its whole batch forever, so
// capture replaces them with U+FFFD in every string of an event, keys included, as it already does
// for distinct_id.

/** JSON.stringify writes NUL as \u0000 and a lone surrogate as \ud8xx–\udfxx: look for those. */
const HOSTILE_ESCAPE = /\\u(?:0000|d[89a-f][0-9a-f]{2})/;

export function hasHostileText(json: string): boolean {
  return json.includes('\\u') && HOSTILE_ESCAPE.test(json);
}

function cleanString(text: string): string {
  return text.toWellFormed().replace(/\0/g, '\ufffd');
}

/** A copy of `value` with every string (and key) cleaned. */
export function cleanStrings(value: unknown): unknown {
  if (typeof value === 'string') return cleanString(value);
  if (Array.isArray(value)) return value.map(cleanStrings);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[cleanString(k)] = cleanStrings(v);
    return out;
  }
  return value;
}

/** The event's NDJSON line, with hostile strings replaced (rare: only then is anything copied). */
export function eventLine(event: object): string {
  const json = JSON.stringify(event);
  return (hasHostileText(json) ? JSON.stringify(cleanStrings(event)) : json) + '\n';
}
