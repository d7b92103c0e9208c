// A real KV bucket (or another real client) whose calls a test can step into: each call goes
// through `around`, which decides when the real call runs and when (or whether) its caller hears
// back. For the faults a real server cannot be made to produce on cue: an answer that comes after
// the caller gave up.
import type { KV } from '@nats-io/kv';

/** `method` and `args` of a call; `call()` runs it against the real bucket. */
export type KvCallHook = (method: string, args: unknown[], call: () => Promise<unknown>) => Promise<unknown>;

export function interceptKvCalls(kv: KV, around: KvCallHook): KV {
  return interceptCalls(kv, around);
}

/** The same for any client object (a JetStreamClient's publish, say): every method goes through `around`. */
export function interceptCalls<T extends object>(client: T, around: KvCallHook): T {
  return new Proxy(client, {
    get(target, prop) {
      const real = Reflect.get(target, prop, target) as unknown;
      if (typeof real !== 'function') return real;
      return (...args: unknown[]) => around(String(prop), args, () => (real as (...a: unknown[]) => Promise<unknown>).apply(target, args));
    },
  });
}
