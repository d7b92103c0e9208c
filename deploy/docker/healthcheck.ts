// Container health check for images without curl or wget:
//   node dist/deploy/docker/healthcheck.js [--wait SECONDS] URL
// Exits 0 once GET URL answers 2xx (each try times out after 2 s), 1 otherwise. With --wait it
// retries every second for that long: an init container waiting for a service to come up.
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const TRY_TIMEOUT_MS = 2_000;

async function probe(url: string): Promise<string | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(TRY_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.ok ? undefined : `HTTP ${res.status}`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const USAGE = `usage: node dist/deploy/docker/healthcheck.js [--wait SECONDS] URL

Exits 0 once GET URL answers 2xx (each try times out after 2 s), 1 otherwise: a container health
check for images without curl or wget. With --wait it tries every second for that long.`;

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ options: { wait: { type: 'string', default: '0' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true });
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const waitSeconds = Number(values.wait);
  const [url, ...extra] = positionals;
  if (!url || extra.length > 0 || !Number.isFinite(waitSeconds) || waitSeconds < 0) {
    console.error(USAGE);
    return 2;
  }
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    const problem = await probe(url);
    if (problem === undefined) return 0;
    if (Date.now() >= deadline) {
      console.error(`${url}: ${problem}`);
      return 1;
    }
    await sleep(1_000);
  }
}

process.exitCode = await main();
