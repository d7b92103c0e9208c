// Strings that JSON allows but PostgreSQL (and many other consumers) refuse: NUL characters and
// unpaired UTF-16 surrogates. Downstream, one such event would fail its whole batch forever, so
// capture replaces them with U+FFFD in every string of an event, keys included, and workers do
// the same with whatever reaches them (lines published by something else than capture, the text
// of malformed lines quoted in warnings).

/**
 * In JSON text, NUL and lone surrogates can only be \u escapes (raw control characters are invalid
 * JSON; raw lone surrogates do not survive UTF-8): look for those. Valid pairs match too, harmlessly.
 */
const HOSTILE_ESCAPE = /\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/;

export function hasHostileText(json: string): boolean {
  return json.includes('\\u') && HOSTILE_ESCAPE.test(json);
}

export function cleanString(text: string): string {
  return text.toWellFormed().replaceAll('\0', '\ufffd');
}

/** A copy of `value` with every string (and key) cleaned. */
export function cleanStrings(value: unknown): unknown {
  if (typeof value === 'string') return cleanString(value);
  if (Array.isArray(value)) return value.map(cleanStrings);
  if (typeof value === 'object' && value !== null) {
    // fromEntries defines own properties: a "__proto__" key stays a key, as JSON.parse made it.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [cleanString(k), cleanStrings(v)]));
  }
  return value;
}
