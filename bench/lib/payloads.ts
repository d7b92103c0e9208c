// Request bodies for the benchmarks: realistic ~350-byte events, as web SDKs send them.

export interface BenchEvent {
  event: string;
  distinct_id: string;
  properties: Record<string, unknown>;
  timestamp: string;
  uuid?: string;
}

const PAGES = ['/', '/pricing', '/docs/getting-started', '/blog/launch-week', '/account/settings'];

/** One event of about 350 bytes of JSON. `i` varies the distinct_id and page. */
export function benchEvent(i: number, distinctIds = 10_000): BenchEvent {
  const page = PAGES[i % PAGES.length]!;
  return {
    event: i % 3 === 0 ? '$pageview' : 'button clicked',
    distinct_id: `user-${(i * 7919) % distinctIds}`,
    properties: {
      $current_url: `https://app.example.com${page}`,
      $browser: 'Chrome',
      $browser_version: 131,
      $os: 'Mac OS X',
      $lib: 'web',
      $lib_version: '1.200.0',
      $session_id: '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
      plan: i % 2 ? 'pro' : 'free',
      index: i,
    },
    timestamp: new Date(Date.UTC(2026, 10, 22, 12, 0, 0) + i).toISOString(),
  };
}

export function singleBody(apiKey: string): string {
  return JSON.stringify({ api_key: apiKey, ...benchEvent(1) });
}

export function batchBody(apiKey: string, count: number, options: { historical?: boolean; offset?: number } = {}): string {
  const batch = Array.from({ length: count }, (_, i) => benchEvent((options.offset ?? 0) + i));
  return JSON.stringify({ api_key: apiKey, historical_migration: options.historical ?? false, batch });
}

/** A batch as close to `bytes` as whole events allow (never above). */
export function batchOfSize(apiKey: string, bytes: number, options: { historical?: boolean } = {}): { body: string; events: number } {
  const head = `{"api_key":${JSON.stringify(apiKey)},"historical_migration":${options.historical ?? false},"batch":[`;
  const parts: string[] = [];
  let size = Buffer.byteLength(head) + 2; // + "]}"
  for (let i = 0; ; i++) {
    const part = JSON.stringify(benchEvent(i));
    const added = Buffer.byteLength(part) + (i > 0 ? 1 : 0);
    if (size + added > bytes) break;
    parts.push(part);
    size += added;
  }
  return { body: `${head}${parts.join(',')}]}`, events: parts.length };
}
