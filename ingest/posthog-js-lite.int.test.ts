// The real posthog-js-lite SDK (PostHog's lightweight web SDK, here in Node with memory
// persistence) against a running ingest node: its remote config and feature-flag calls answer
// without an error, and what it captures lands.
import { PostHog } from 'posthog-js-lite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

const KEY = 'phc_lite_test';
let h: IngestHarness;

beforeAll(async () => {
  h = await startIngestHarness({ SPIKE_EVENTS_PER_SECOND: '0' }, { [KEY]: 9 });
});
afterAll(() => h?.stop());

describe('posthog-js-lite SDK', () => {
  it('sdk lite - remote config and flags load without errors, and captured events land', async () => {
    const calls = (route: string) => h.metric('spate_ingest_requests_total', { route, status: '200' });
    const [flagsBefore, configBefore] = [await calls('flags'), await calls('config')];
    const posthog = new PostHog(KEY, { host: h.url, persistence: 'memory', flushAt: 1, flushInterval: 0, fetchRetryCount: 0 });
    const errors: unknown[] = [];
    posthog.on('error', (err) => errors.push(err));

    // The constructor already asked for the flags; ask again and wait for the answer.
    const flags = await posthog.reloadFeatureFlagsAsync();
    expect(flags).toEqual({});
    expect(posthog.getFeatureFlag('new-checkout')).toBeUndefined();
    expect(posthog.isFeatureEnabled('new-checkout')).toBeUndefined();
    const remote = await posthog.reloadRemoteConfigAsync();
    expect(remote).toMatchObject({ hasFeatureFlags: false, sessionRecording: false });

    posthog.identify('lite-user', { plan: 'pro' });
    posthog.capture('lite viewed', { page: 'home' });
    await posthog.shutdown();

    expect(errors).toEqual([]);
    expect(await calls('flags')).toBeGreaterThanOrEqual(flagsBefore + 2);
    expect(await calls('config')).toBeGreaterThanOrEqual(configBefore + 1);
    const landed = (await h.events('events')).filter((e) => e.token === KEY);
    expect(landed.map((e) => e.event).sort()).toEqual(['$feature_flag_called', '$identify', 'lite viewed']);
    // getFeatureFlag's record: the server answered (a request id) and has no such flag.
    const called = landed.find((e) => e.event === '$feature_flag_called')!;
    expect(called.properties).toMatchObject({ $feature_flag: 'new-checkout', $feature_flag_error: 'flag_missing', $feature_flag_request_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const viewed = landed.find((e) => e.event === 'lite viewed')!;
    expect(viewed.distinct_id).toBe('lite-user');
    expect(viewed.properties).toMatchObject({ page: 'home', $lib: 'js', $lib_version: expect.any(String) });
  });
});
