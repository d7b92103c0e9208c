// Health probes shared by the fault suites (test/faults, test/multihost): each answers true only
// when the thing it asks about would serve a user now, and never throws.
import pg from 'pg';

/** Whether a process of this pid exists (signal 0 checks without sending anything). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A GET that answers 2xx within `timeoutMs`. */
export async function ok(url: string, timeoutMs = 2_000): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).catch(() => undefined);
  await res?.arrayBuffer().catch(() => undefined);
  return res?.ok === true;
}

export async function postgresAnswers(url: string, timeoutMs = 2_000): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The shards a worker reports owning on `<base>/_ready` (undefined: not ready, or no answer). */
export async function workerShards(baseUrl: string, timeoutMs = 2_000): Promise<number[] | undefined> {
  const res = await fetch(`${baseUrl}/_ready`, { signal: AbortSignal.timeout(timeoutMs) }).catch(() => undefined);
  if (!res?.ok) {
    await res?.arrayBuffer().catch(() => undefined);
    return undefined;
  }
  return ((await res.json()) as { shards?: number[] }).shards;
}

/** Every worker ready and every shard owned by exactly one of them. */
export function shardsCovered(owned: readonly (number[] | undefined)[], shardCount: number): boolean {
  const shards = owned.flatMap((s) => s ?? []);
  return owned.every((s) => s !== undefined) && shards.length === shardCount && new Set(shards).size === shardCount;
}
