// A /batch/ request body built from records' bytes as they are in the file (no re-serialising):
// {"api_key":…,"historical_migration":true,"batch":[<record>,<record>,…]}. A record without a
// uuid gets one spliced in front of its first key.

export interface BatchItem {
  position: number;
  line: number;
  bytes: Buffer;
}

const COMMA = Buffer.from(',');
const TAIL = Buffer.from(']}');

export function batchHead(apiKey: string): Buffer {
  return Buffer.from(`{"api_key":${JSON.stringify(apiKey)},"historical_migration":true,"batch":[`);
}

/** Bytes of a body holding `items` whose bytes add up to `itemBytes`. */
export function bodySize(head: Buffer, count: number, itemBytes: number): number {
  return head.length + itemBytes + Math.max(0, count - 1) + TAIL.length;
}

export function buildBody(head: Buffer, items: readonly BatchItem[]): Buffer {
  const parts: Buffer[] = [head];
  for (let i = 0; i < items.length; i++) {
    if (i > 0) parts.push(COMMA);
    parts.push(items[i]!.bytes);
  }
  parts.push(TAIL);
  return Buffer.concat(parts);
}

/** The record (a JSON object starting with `{`) with `"uuid":"<uuid>",` as its first key. */
export function withUuid(bytes: Buffer, uuid: string): Buffer {
  const prefix = `{"uuid":"${uuid}"`;
  // `{}` would need no comma, but a record without an event name never gets here.
  const rest = bytes.subarray(1);
  const needsComma = rest.length > 0 && !/^\s*\}/.test(rest.subarray(0, 16).toString('latin1'));
  return Buffer.concat([Buffer.from(needsComma ? `${prefix},` : prefix), rest]);
}
