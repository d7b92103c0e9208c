// A processed event as the persons role writes it to PROCESSED (~430 bytes, like the worker
// benchmark's mix): what the export and plugin delivery benchmarks read back. Deterministic in `i`.

export function processedWebEvent(i: number, timestamp: string, now: string, projectId: number): Record<string, unknown> {
  return {
    uuid: `0190a0a0-0000-7000-8000-${String(i).padStart(12, '0')}`,
    event: i % 10 === 0 ? '$identify' : i % 3 === 0 ? '$pageview' : 'button clicked',
    distinct_id: `user-${i % 50_000}`,
    properties: {
      $current_url: `https://shop.example.com/products/${i % 997}?ref=campaign-${i % 13}`,
      $browser: i % 2 ? 'Chrome' : 'Firefox',
      $os: 'Mac OS X',
      $lib: 'web',
      $lib_version: '1.130.0',
      $screen_width: 1440,
      $session_id: `0190a0a0-1111-7000-8000-${String(i % 20_000).padStart(12, '0')}`,
      plan: i % 5 ? 'free' : 'pro',
      cart_items: i % 7,
    },
    timestamp,
    now,
    token: 'phc_bench',
    project_id: projectId,
    person_id: `0190a0a0-2222-7000-8000-${String(i % 50_000).padStart(12, '0')}`,
  };
}
