// A file whose sink fails (S3: the upload failed and destroyed its body) must fail the run's
// writes, not leave them waiting for a 'drain' or a 'finish' that never comes.
import { randomBytes } from 'node:crypto';
import { Transform } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { openRecordFile } from './file-writer.js';

async function writeUntilItFails(compression: string | null): Promise<string> {
  const sink = new Transform({ transform: (chunk: Buffer, _encoding, done) => done(null, chunk) });
  sink.on('error', () => undefined);
  sink.resume();
  const file = openRecordFile({ format: 'JSONLines', compression }, sink, 'events');
  sink.destroy(new Error('the upload failed'));
  const run = (async () => {
    // Random text: gzip cannot shrink it below its input, so its buffers fill.
    for (let i = 0; i < 64; i++) {
      const text = `${randomBytes(96 * 1024).toString('base64')}\n`;
      await file.writeText!(text, text.length, 1);
    }
    await file.end();
  })();
  const hung = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5_000).unref());
  return Promise.race([run.then(() => 'finished', (err: Error) => `failed: ${err.message}`), hung]);
}

describe('export files', () => {
  it('files - a sink destroyed by a failed upload fails the writes or the end of a JSONLines file (gzip, brotli, none), it does not hang', async () => {
    for (const compression of ['gzip', 'brotli', null]) {
      expect(await writeUntilItFails(compression), String(compression)).toMatch(/^failed: /);
    }
  });
});
