// /batch/ bodies of the realistic mix (worker-mix.ts: custom events of known persons, $identify,
// $create_alias, $groupidentify) as SDKs send them, for the end-to-end stage. Every body has
// fresh uuids (the pipeline drops a uuid it has seen), fresh anonymous and alias ids, and the
// time it was made in each event's `$bench_sent_ms` (end-to-end lag is read from PROCESSED).
// Bodies are cut from a few templates serialised once: making one costs the load generator a
// few string joins, not a JSON.stringify of a thousand events (which would take CPU from the
// pipeline it measures, on the same cores).
import { randomBytes } from 'node:crypto';
import { MixGenerator } from './worker-mix.js';

/** The property that carries when an event was sent (ms since the epoch). */
export const SENT_PROPERTY = '$bench_sent_ms';

const UUID_SLOT = '"@@uuid@@"';
const SENT_SLOT = '"@@sent@@"';
const FRESH_SLOT = '@@fresh@@';
const SLOTS = /"@@uuid@@"|"@@sent@@"|@@fresh@@/g;

type Slot = 'uuid' | 'sent' | 'fresh';

interface Template {
  pieces: string[];
  slots: Slot[];
}

export interface MixBodyOptions {
  /** Events per body (at most 4,096). */
  perRequest: number;
  /** Known distinct ids the custom events spread over (default 20,000). */
  persons?: number;
}

export class MixBodies {
  private readonly templates: Template[] = [];
  private requests = 0;
  /** Per generator, so two in one process (or two runs) never make the same uuid. */
  private readonly prefix = randomBytes(4).toString('hex');
  private readonly suffix = randomBytes(6).toString('hex');
  /** Events of each kind per body, summed over the templates' rotation. */
  readonly mix: Record<string, number>;

  constructor(
    private readonly apiKey: string,
    private readonly o: MixBodyOptions,
  ) {
    if (!(o.perRequest > 0 && o.perRequest <= 4096)) throw new RangeError(`perRequest must be 1 to 4096 (got ${o.perRequest})`);
    const persons = o.persons ?? 20_000;
    const gen = new MixGenerator(persons);
    // Enough templates for the custom events to reach every known person.
    const count = Math.max(1, Math.ceil(persons / o.perRequest));
    for (let t = 0; t < count; t++) {
      const batch = [];
      for (let i = 0; i < o.perRequest; i++) {
        const e = gen.next();
        const properties: Record<string, unknown> = { ...e.properties, [SENT_PROPERTY]: '@@sent@@' };
        // Ids a real stream would not repeat: each body gets its own.
        if (typeof properties.$anon_distinct_id === 'string') properties.$anon_distinct_id = `anon-${FRESH_SLOT}-${i}`;
        if (typeof properties.alias === 'string') properties.alias = `alias-${FRESH_SLOT}-${i}`;
        batch.push({ uuid: '@@uuid@@', event: e.event, distinct_id: e.distinct_id, properties, timestamp: e.timestamp });
      }
      const text = JSON.stringify({ api_key: apiKey, batch });
      const pieces = text.split(SLOTS);
      const slots = [...text.matchAll(SLOTS)].map((m): Slot => (m[0] === UUID_SLOT ? 'uuid' : m[0] === SENT_SLOT ? 'sent' : 'fresh'));
      this.templates.push({ pieces, slots });
    }
    this.mix = { ...gen.mix };
  }

  get perRequest(): number {
    return this.o.perRequest;
  }

  /** The next body: fresh uuids and ids, sent now (or at `sentMs`). */
  next(sentMs = Date.now()): string {
    const request = this.requests++;
    const template = this.templates[request % this.templates.length]!;
    const req = request.toString(16).padStart(7, '0').slice(-7);
    const uuidHead = `"${this.prefix}-${req.slice(0, 4)}-4${req.slice(4)}-a`;
    const uuidTail = `-${this.suffix}"`;
    const sent = String(sentMs);
    const fresh = `${this.prefix}${req}`;
    let out = template.pieces[0]!;
    let event = 0;
    for (let i = 0; i < template.slots.length; i++) {
      const slot = template.slots[i];
      if (slot === 'uuid') out += uuidHead + (event++).toString(16).padStart(3, '0') + uuidTail;
      else if (slot === 'sent') out += sent;
      else out += fresh;
      out += template.pieces[i + 1]!;
    }
    return out;
  }
}
