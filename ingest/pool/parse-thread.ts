// A piscina thread: decodes and parses one request body. The body arrives as a transferred
// ArrayBuffer; the result goes back as transferred buffers, never as cloned event objects.
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina';
import { CaptureError } from '../errors.js';
import { parseCaptureRequest } from '../parse/index.js';
import type { ParseTask, ParseTaskResult, ParseThreadData } from './parse-task.js';
import { toWire } from './parsed-wire.js';
import { RegistryReplica } from './registry-replica.js';

const { registryChannel, retryAfterSeconds } = workerData as ParseThreadData;
const replica = new RegistryReplica(registryChannel, { retryAfterSeconds });

export default async function parseInThread(task: ParseTask): Promise<ParseTaskResult> {
  try {
    await replica.atLeast(task.registryVersion);
    const body = new Uint8Array(task.body, task.byteOffset, task.byteLength);
    const parsed = toWire(parseCaptureRequest(body, task.meta, task.limits, replica.lookup));
    const result: ParseTaskResult = { ok: true, parsed };
    return move({
      get [transferableSymbol]() {
        return [parsed.data.buffer, parsed.table.buffer];
      },
      get [valueSymbol]() {
        return result;
      },
    }) as unknown as ParseTaskResult;
  } catch (err) {
    // Errors lose their class crossing threads: send the code, rebuild the CaptureError there.
    if (err instanceof CaptureError) return { ok: false, code: err.code, detail: err.message, attr: err.attr, headers: err.headers };
    throw err;
  }
}
