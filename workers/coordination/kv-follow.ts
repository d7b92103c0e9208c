// Following a KV bucket the admin server writes (spate-batch-exports, spate-plugin-configs): every
// key loaded first (so a role starts from the complete state), then its changes watched; a watch
// that ends (NATS restarted, a network cut) is opened again.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KV } from '@nats-io/kv';
import type { Logger } from '../../lib/index.js';
import { errorText } from './failures.js';

export interface BucketHandlers {
  put(key: string, value: string): void;
  remove(key: string): void;
}

/** Loads every key of `kv`, then watches it until `stopped()`; returns once loaded. */
export async function followBucket(kv: KV, handlers: BucketHandlers, options: { stopped: () => boolean; logger: Logger; what: string }): Promise<{ stop(): void }> {
  const keys: string[] = [];
  for await (const key of await kv.keys()) keys.push(key);
  for (const key of keys) {
    const entry = await kv.get(key);
    if (entry?.operation === 'PUT') handlers.put(key, entry.string());
  }
  let watcher: { stop(): void } | undefined;
  const loop = async () => {
    while (!options.stopped()) {
      try {
        const iter = await kv.watch({ key: '>' });
        watcher = iter;
        for await (const entry of iter) {
          if (entry.operation === 'PUT') handlers.put(entry.key, entry.string());
          else handlers.remove(entry.key);
        }
      } catch (err) {
        if (!options.stopped()) options.logger.debug({ err: errorText(err) }, `${options.what} watch ended: restarting it`);
      }
      if (!options.stopped()) await sleep(500);
    }
  };
  void loop();
  return { stop: () => watcher?.stop() };
}
