// A piscina thread: decodes and parses one request body. The body arrives as a transferred
// ArrayBuffer; the result goes back as transferred buffers, never as cloned event objects.
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina';
import { CaptureError } from '../errors.js';
import { SharedBudget } from '../inflight-budget.js';
import { parseCaptureRequest } from '../parse/index.js';
import type { ParseTask, ParseTaskResult, ParseThreadData } from './parse-task.js';
import { toWire } from './parsed-wire.js';
import { RegistryReplica } from './registry-replica.js';

const { registryChannel, retryAfterSeconds, budget: budgetMemory, budgetLimit } = workerData as ParseThreadData;
const replica = new RegistryReplica(registryChannel, { retryAfterSeconds });
const budget = new SharedBudget(budgetLimit, budgetMemory);

export default async function parseInThread(task: ParseTask): Promise<ParseTaskResult> {
  try {
    await replica.atLeast(task.registryVersion);
    const body = new Uint8Array(task.body, task.byteOffset, task.byteLength);
    // Decoded and output bytes are taken from the node's budget before they are allocated; the
    // task's count is shared, so the event loop gives them back even if this thread dies.
    const reserved = new BigInt64Array(task.reserved);
    const reserve = (bytes: number) => {
      if (!budget.tryReserve(bytes, task.heldByRequest + Number(Atomics.load(reserved, 0)))) return false;
      Atomics.add(reserved, 0, BigInt(bytes));
      return true;
    };
    const unreserve = (bytes: number) => {
      Atomics.sub(reserved, 0, BigInt(bytes));
      budget.release(bytes);
    };
    const parsed = toWire(parseCaptureRequest(body, task.meta, task.limits, replica.lookup, { transferable: true, reserve, unreserve }));
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
