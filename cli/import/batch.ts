// A /batch/ request body built from records' bytes as they are in the file (no re-serialising):
// {"api_key":…,"historical_migration":true,"batch":[<record>,<record>,…]}. A record without a
// uuid gets one spliced in front of its first key while the body is written (one copy in all).

export interface BatchItem {
  position: number;
  line: number;
  /** The record: a JSON object with at least one key (validated). */
  bytes: Buffer;
  /** A uuid to add as the record's first key. */
  uuid?: string;
}

/** `"uuid":"<36 characters>",` — what splicing a uuid adds to a record. */
const UUID_KEY_BYTES = '"uuid":"",'.length + 36;

export function itemSize(item: BatchItem): number {
  return item.bytes.length + (item.uuid === undefined ? 0 : UUID_KEY_BYTES);
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
  let size = 0;
  for (const item of items) size += itemSize(item);
  const body = Buffer.allocUnsafe(bodySize(head, items.length, size));
  let at = head.copy(body, 0);
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (i > 0) body[at++] = COMMA[0]!;
    if (item.uuid === undefined) {
      at += item.bytes.copy(body, at);
    } else {
      at += body.write(`{"uuid":"${item.uuid}",`, at, 'latin1');
      at += item.bytes.copy(body, at, 1);
    }
  }
  at += TAIL.copy(body, at);
  return body.subarray(0, at);
}
