// PostgreSQL text and jsonb cannot hold U+0000, and jsonb refuses lone surrogates: an event carrying
// one would fail its batch's writes on every retry and stop its shard for good. Such characters
// become U+FFFD (what TextEncoder writes for a lone surrogate); everything else is left alone.

/**
 * True when a JSON text may hold such a character. In valid JSON they can only be \u escapes
 * (raw control characters are invalid JSON; raw lone surrogates cannot survive UTF-8 decoding).
 */
export function mayHoldUnstorableText(json: string): boolean {
  return json.includes('\\u') && /\\u0000|\\u[dD][89a-fA-F]/.test(json);
}

export function storableText(text: string): string {
  return text.toWellFormed().replaceAll('\u0000', '\uFFFD');
}

/** A copy of a parsed JSON value with every string and key made storable. */
export function storableValue(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storableValue);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) out[storableText(key)] = storableValue(inner);
    return out;
  }
  return value;
}
