// The host's side of a batch's result string (prelude.ts): a record per event that did not come
// back unchanged, `@<index>;` then one or more length-prefixed parts:
//   T<key><value>  set a top-level field        X<key>  delete a top-level field
//   P<key><value>  set a property               D<key>  delete a property
//   A<json>        replace all properties       R<json> the result as a whole (another object)
//   W<json><body>  a result object whose string `body` comes apart, unescaped (webhooks)
//   V<json>        a result object whose `body` is the event's own JSON text, as the host made it
//                  (columns.ts eventTexts: a webhook of the whole event crosses back as nothing)
//   N              null or undefined            E<name><message>  the call threw
// where <key>, <json>, <name>, <message> are `<length>:<text>` (length in UTF-16 units, as the
// engine counts) and <value> is s<str> | n<str> | b1 | b0 | z (null) | u (undefined) | j<json>.

export type EventOutcome =
  | {
      kind: 'patch';
      index: number;
      /** Top-level fields set (value undefined: set to undefined) and deleted. */
      top: Array<[string, unknown]>;
      topDeleted: string[];
      /** Properties set and deleted; `replaced`: all properties replaced by this object. */
      properties: Array<[string, unknown]>;
      propertiesDeleted: string[];
      replaced: Record<string, unknown> | undefined;
      /** Characters of the record: an upper bound of what the change adds to the event. */
      size: number;
    }
  | { kind: 'result'; index: number; value: unknown; size: number }
  | { kind: 'null'; index: number }
  | { kind: 'error'; index: number; name: string; message: string };

export class ResultFormatError extends Error {
  override name = 'ResultFormatError';
}

/**
 * Decodes a batch's result string into outcomes, in the order the events settled. `events`: the
 * batch's count; a plugin can forge records (it shares the prelude's realm), so more records than
 * events is malformed, not decoded (each record costs the host memory). `ownText`: the JSON text
 * of event `index` as the plugin saw it (for "V").
 */
export function decodeResults(text: string, events: number, ownText: (index: number) => string | undefined = () => undefined): EventOutcome[] {
  const out: EventOutcome[] = [];
  let at = 0;
  let records = 0;
  const fail = (what: string): never => {
    throw new ResultFormatError(`malformed sandbox result at ${at}: ${what}`);
  };
  const sized = (): string => {
    const colon = text.indexOf(':', at);
    if (colon === -1) fail('length');
    const length = Number(text.slice(at, colon));
    if (!Number.isInteger(length) || length < 0 || colon + 1 + length > text.length) fail('length');
    at = colon + 1 + length;
    return text.slice(colon + 1, at);
  };
  const value = (): unknown => {
    const tag = text[at++];
    switch (tag) {
      case 's':
        return sized();
      case 'n':
        return Number(sized());
      case 'b':
        return text[at++] === '1';
      case 'z':
        return null;
      case 'u':
        return undefined;
      case 'j':
        return JSON.parse(sized()) as unknown;
      default:
        return fail(`value tag ${tag}`);
    }
  };
  while (at < text.length) {
    const start = at;
    if (text[at] !== '@') fail('record');
    if (++records > events) fail(`more records than the batch's ${events} events`);
    const semi = text.indexOf(';', at);
    const index = Number(text.slice(at + 1, semi));
    if (semi === -1 || !Number.isInteger(index) || index < 0) fail('index');
    at = semi + 1;
    let patch: Extract<EventOutcome, { kind: 'patch' }> | undefined;
    const ensurePatch = () => (patch ??= { kind: 'patch', index, top: [], topDeleted: [], properties: [], propertiesDeleted: [], replaced: undefined, size: 0 });
    let done = false;
    while (!done && at < text.length && text[at] !== '@') {
      const op = text[at++];
      switch (op) {
        case 'T':
          ensurePatch().top.push([sized(), value()]);
          break;
        case 'X':
          ensurePatch().topDeleted.push(sized());
          break;
        case 'P':
          ensurePatch().properties.push([sized(), value()]);
          break;
        case 'D':
          ensurePatch().propertiesDeleted.push(sized());
          break;
        case 'A':
          ensurePatch().replaced = JSON.parse(sized()) as Record<string, unknown>;
          break;
        case 'R': {
          const json = sized();
          out.push({ kind: 'result', index, value: JSON.parse(json) as unknown, size: json.length });
          done = true;
          break;
        }
        case 'W': {
          const json = sized();
          const body = sized();
          const value = JSON.parse(json) as Record<string, unknown>;
          value.body = body;
          out.push({ kind: 'result', index, value, size: json.length + body.length });
          done = true;
          break;
        }
        case 'V': {
          const json = sized();
          const body = ownText(index);
          if (body === undefined) fail('no text of the event');
          const value = JSON.parse(json) as Record<string, unknown>;
          value.body = body;
          out.push({ kind: 'result', index, value, size: json.length + body!.length });
          done = true;
          break;
        }
        case 'N':
          out.push({ kind: 'null', index });
          done = true;
          break;
        case 'E':
          out.push({ kind: 'error', index, name: sized(), message: sized() });
          done = true;
          break;
        default:
          fail(`op ${op}`);
      }
    }
    if (patch) {
      patch.size = at - start;
      out.push(patch);
    }
  }
  return out;
}
