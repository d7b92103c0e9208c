// Splits a decompressed input into records, without parsing them: NDJSON into lines, a JSON
// array into its top-level elements. Each record keeps its bytes (sent as they are) and where it
// sits in the file (reported with validation errors; the checkpoint and event uuids key on it).
//
// Why not a streaming JSON library: a token-level parser (stream-json) builds every value of
// every event only to have us rebuild the text; here an element's bytes are all we need, and a
// byte scan that only tracks strings and nesting is several times faster.

export type InputFormat = 'ndjson' | 'array';

export interface RawRecord {
  /** NDJSON: the line number; JSON array: the element's 1-based index. Unique within a file. */
  position: number;
  /** 1-based line where the record starts (for messages). */
  line: number;
  /** The record's bytes, trimmed of surrounding whitespace. Valid until the next push(). */
  bytes: Buffer;
}

export interface RecordSplitter {
  /** Records completed by this chunk (their `bytes` may point into the chunk). A UTF-8 BOM is the source's to strip. */
  push(chunk: Buffer): RawRecord[];
  /** Records left when the input ends; throws InputFormatError when the input is truncated. */
  end(): RawRecord[];
}

export class InputFormatError extends Error {
  override name = 'InputFormatError';
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(message);
  }
}

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const TAB = 0x09;
const isSpace = (b: number) => b === SPACE || b === LF || b === CR || b === TAB;

function trim(bytes: Buffer): Buffer {
  let start = 0;
  let end = bytes.length;
  while (start < end && isSpace(bytes[start]!)) start++;
  while (end > start && isSpace(bytes[end - 1]!)) end--;
  return start === 0 && end === bytes.length ? bytes : bytes.subarray(start, end);
}

/** The format of a decompressed input, from its first byte that is not whitespace or a BOM. */
export function detectFormat(head: Buffer): InputFormat | undefined {
  let i = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0;
  while (i < head.length && isSpace(head[i]!)) i++;
  if (i >= head.length) return undefined;
  return head[i] === 0x5b /* [ */ ? 'array' : 'ndjson';
}

/** Lines of NDJSON; blank lines are not records (their numbers are still counted). */
export class NdjsonSplitter implements RecordSplitter {
  private carry: Buffer | undefined;
  private lineNo = 0;

  push(chunk: Buffer): RawRecord[] {
    const out: RawRecord[] = [];
    let start = 0;
    let nl = chunk.indexOf(LF);
    if (nl !== -1 && this.carry) {
      this.emit(Buffer.concat([this.carry, chunk.subarray(0, nl)]), out);
      this.carry = undefined;
      start = nl + 1;
      nl = chunk.indexOf(LF, start);
    }
    while (nl !== -1) {
      this.emit(chunk.subarray(start, nl), out);
      start = nl + 1;
      nl = chunk.indexOf(LF, start);
    }
    if (start < chunk.length) {
      // An unfinished line: copy it, the caller may reuse the chunk.
      const rest = chunk.subarray(start);
      this.carry = this.carry ? Buffer.concat([this.carry, rest]) : Buffer.from(rest);
    }
    return out;
  }

  end(): RawRecord[] {
    const out: RawRecord[] = [];
    if (this.carry) this.emit(this.carry, out);
    this.carry = undefined;
    return out;
  }

  private emit(line: Buffer, out: RawRecord[]): void {
    const n = ++this.lineNo;
    const bytes = trim(line);
    if (bytes.length > 0) out.push({ position: n, line: n, bytes });
  }
}

const enum State {
  /** Before the opening `[`. */
  Start,
  /** After `[` or `,`: whitespace, then an element (or `]` right after `[`). */
  BeforeElement,
  /** Inside an element. */
  InElement,
  /** After an element: whitespace, then `,` or `]`. */
  AfterElement,
  /** After the closing `]`: only whitespace may follow. */
  Done,
}

/**
 * Top-level elements of one JSON array. Only strings (with escapes) and nesting are tracked, so
 * an element is cut exactly where JSON says it ends; whether it is valid JSON is decided later,
 * per element, so one bad element is reported by its index instead of failing the whole file.
 */
export class JsonArraySplitter implements RecordSplitter {
  private state = State.Start;
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Bytes of the element in progress from earlier chunks (copies). */
  private parts: Buffer[] = [];
  private index = 0;
  private lineNo = 1;
  private elementLine = 1;

  push(chunk: Buffer): RawRecord[] {
    const out: RawRecord[] = [];
    let elementStart = 0; // where the element in progress starts in this chunk
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (b === LF) this.lineNo++;
      switch (this.state) {
        case State.InElement:
          if (this.inString) {
            if (this.escaped) this.escaped = false;
            else if (b === 0x5c /* \ */) this.escaped = true;
            else if (b === 0x22 /* " */) this.inString = false;
          } else if (b === 0x22) {
            this.inString = true;
          } else if (b === 0x7b /* { */ || b === 0x5b /* [ */) {
            this.depth++;
          } else if (b === 0x7d /* } */ || b === 0x5d /* ] */) {
            if (this.depth === 0 && b === 0x5d) {
              // The array's own `]` right after a scalar element.
              this.finish(chunk.subarray(elementStart, i), out);
              this.state = State.Done;
            } else if (this.depth <= 1) {
              // A top-level object or array closed (or a stray `}`, which JSON.parse will name).
              this.depth = 0;
              this.finish(chunk.subarray(elementStart, i + 1), out);
              this.state = State.AfterElement;
            } else {
              this.depth--;
            }
          } else if (b === 0x2c /* , */ && this.depth === 0) {
            this.finish(chunk.subarray(elementStart, i), out);
            this.state = State.BeforeElement;
          }
          continue;
        case State.BeforeElement:
          if (isSpace(b)) continue;
          if (b === 0x5d && this.index === 0 && this.parts.length === 0) {
            this.state = State.Done; // []
            continue;
          }
          if (b === 0x2c || b === 0x5d) throw new InputFormatError(`array element ${this.index + 1} is missing`, this.lineNo);
          this.state = State.InElement;
          this.depth = 0;
          this.inString = false;
          this.escaped = false;
          this.elementLine = this.lineNo;
          elementStart = i;
          i--; // look at this byte again as the element's first (never a newline: skipped above)
          continue;
        case State.AfterElement:
          if (isSpace(b)) continue;
          if (b === 0x2c) this.state = State.BeforeElement;
          else if (b === 0x5d) this.state = State.Done;
          else throw new InputFormatError(`expected , or ] after array element ${this.index}`, this.lineNo);
          continue;
        case State.Start:
          if (isSpace(b)) continue;
          if (b !== 0x5b) throw new InputFormatError('expected a JSON array', this.lineNo);
          this.state = State.BeforeElement;
          continue;
        case State.Done:
          if (!isSpace(b)) throw new InputFormatError('unexpected data after the end of the JSON array', this.lineNo);
          continue;
      }
    }
    if (this.state === State.InElement) this.parts.push(Buffer.from(chunk.subarray(elementStart)));
    return out;
  }

  private finish(tail: Buffer, out: RawRecord[]): void {
    const whole = this.parts.length > 0 ? Buffer.concat([...this.parts, tail]) : tail;
    this.parts = [];
    this.index++;
    out.push({ position: this.index, line: this.elementLine, bytes: trim(whole) });
  }

  end(): RawRecord[] {
    if (this.state === State.Done || this.state === State.Start) return [];
    throw new InputFormatError('the JSON array is not closed (truncated file?)', this.lineNo);
  }
}

export function recordSplitter(format: InputFormat): RecordSplitter {
  return format === 'array' ? new JsonArraySplitter() : new NdjsonSplitter();
}
