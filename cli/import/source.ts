// One input of `spate import`: a file or stdin (`-`), gzip or not (told by its magic bytes,
// whatever its name), decompressed as a stream. The first MiB of decompressed content is read
// up front: its SHA-256 is the file's identity, which keys the checkpoint and event uuids, so
// the same data piped in again, or gzipped, is recognised as the same file.
import { createHash } from 'node:crypto';
import { createReadStream, statSync } from 'node:fs';
import { pipeline, Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { detectFormat, type InputFormat } from './records.js';

export const IDENTITY_HEAD_BYTES = 1024 * 1024;
const READ_CHUNK = 1024 * 1024;

export interface InputSource {
  /** As given on the command line (`-` for stdin). */
  name: string;
  /** Size on disk of a regular file (compressed bytes for gzip); undefined for stdin and pipes. */
  size: number | undefined;
  gzip: boolean;
  /** SHA-256 (hex) of the first MiB of decompressed content. */
  identity: string;
  /** undefined when the input is empty (or only whitespace). */
  format: InputFormat | undefined;
  /** Bytes read from the file or stdin so far (before decompression). */
  rawBytesRead(): number;
  /** The decompressed content from its first byte, in chunks that are never reused. */
  chunks(): AsyncIterable<Buffer>;
  close(): void;
}

export class InputError extends Error {
  override name = 'InputError';
}

export async function openSource(name: string, stdin: Readable = process.stdin): Promise<InputSource> {
  let size: number | undefined;
  let raw: Readable;
  if (name === '-') {
    raw = stdin;
  } else {
    let stat;
    try {
      stat = statSync(name);
    } catch (err) {
      throw new InputError(`cannot read ${name}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`, { cause: err });
    }
    if (stat.isDirectory()) throw new InputError(`${name} is a directory`);
    if (stat.isFile()) size = stat.size;
    raw = createReadStream(name, { highWaterMark: READ_CHUNK });
  }
  let rawBytes = 0;
  const rawIterator = raw[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const rawHead: Buffer[] = [];
  let rawHeadBytes = 0;
  let rawDone = false;
  try {
    while (rawHeadBytes < 2) {
      const next = await rawIterator.next();
      if (next.done) {
        rawDone = true;
        break;
      }
      const chunk = typeof next.value === 'string' ? Buffer.from(next.value) : next.value;
      rawHead.push(chunk);
      rawHeadBytes += chunk.length;
    }
  } catch (err) {
    throw new InputError(`cannot read ${name}: ${(err as Error).message}`, { cause: err });
  }
  const first = Buffer.concat(rawHead);
  const gzip = first.length >= 2 && first[0] === 0x1f && first[1] === 0x8b;

  async function* rawChunks(): AsyncGenerator<Buffer> {
    for (const chunk of rawHead) {
      rawBytes += chunk.length;
      yield chunk;
    }
    if (rawDone) return;
    for (;;) {
      const next = await rawIterator.next();
      if (next.done) return;
      const chunk = typeof next.value === 'string' ? Buffer.from(next.value) : next.value;
      rawBytes += chunk.length;
      yield chunk;
    }
  }

  let content: AsyncIterator<Buffer>;
  let destroy: () => void;
  if (gzip) {
    const source = Readable.from(rawChunks(), { objectMode: false });
    const gunzip = createGunzip({ chunkSize: 256 * 1024 });
    // pipeline destroys both sides on error, so iterating gunzip throws the cause (bad gzip data).
    pipeline(source, gunzip, () => undefined);
    content = gunzip[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    destroy = () => {
      source.destroy();
      gunzip.destroy();
      raw.destroy();
    };
  } else {
    content = rawChunks();
    destroy = () => raw.destroy();
  }

  // The identity head: buffered here, replayed first by chunks().
  const head: Buffer[] = [];
  let headBytes = 0;
  let contentDone = false;
  try {
    while (headBytes < IDENTITY_HEAD_BYTES) {
      const next = await content.next();
      if (next.done) {
        contentDone = true;
        break;
      }
      head.push(next.value);
      headBytes += next.value.length;
    }
  } catch (err) {
    destroy();
    throw new InputError(`cannot read ${name}${gzip ? ' (gzip)' : ''}: ${(err as Error).message}`, { cause: err });
  }
  let headBuffer = Buffer.concat(head);
  // A UTF-8 byte order mark is not content (editors on Windows add one).
  if (headBuffer[0] === 0xef && headBuffer[1] === 0xbb && headBuffer[2] === 0xbf) headBuffer = headBuffer.subarray(3);
  const identity = createHash('sha256').update(headBuffer.subarray(0, IDENTITY_HEAD_BYTES)).digest('hex');

  return {
    name,
    size,
    gzip,
    identity,
    format: detectFormat(headBuffer),
    rawBytesRead: () => rawBytes,
    async *chunks() {
      if (headBuffer.length > 0) yield headBuffer;
      if (contentDone) return;
      try {
        for (;;) {
          const next = await content.next();
          if (next.done) return;
          yield next.value;
        }
      } catch (err) {
        throw new InputError(`cannot read ${name}${gzip ? ' (gzip)' : ''}: ${(err as Error).message}`, { cause: err });
      }
    },
    close: destroy,
  };
}
