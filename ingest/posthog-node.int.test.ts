// The real posthog-node SDK sending to a running ingest node.
import { PostHog } from 'posthog-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf, subjectFor } from '../lib/index.js';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

describe('posthog-node SDK', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({ SPIKE_EVENTS_PER_SECOND: '0' }, { phc_sdk_test: 42 });
  });
  afterAll(() => h.stop());

  it('sdk - capture, identify, alias and groupIdentify each land once on the right subject', async () => {
    const client = new PostHog('phc_sdk_test', { host: h.url, flushAt: 1, flushInterval: 0, fetchRetryCount: 0 });
    client.capture({ distinctId: 'user-1', event: 'signed up', properties: { plan: 'pro' } });
    client.identify({ distinctId: 'user-1', properties: { email: 'u1@example.com' } });
    client.alias({ distinctId: 'user-1', alias: 'anon-1' });
    client.groupIdentify({ groupType: 'company', groupKey: 'acme', properties: { seats: 10 } });
    await client.shutdown();

    const messages = await h.messages('events');
    const events = messages.flatMap((m) => m.events.map((e) => ({ ...e, subject: m.subject })));
    const names = events.map((e) => e.event).sort();
    expect(names).toEqual(['$create_alias', '$groupidentify', '$identify', 'signed up']);
    expect(new Set(events.map((e) => e.uuid)).size).toBe(4);
    for (const e of events) {
      expect(e.token).toBe('phc_sdk_test');
      expect(e.project_id).toBe(42);
      expect(e.subject).toBe(subjectFor('events', 42, shardOf(e.distinct_id, 16)));
    }
    const capture = events.find((e) => e.event === 'signed up')!;
    expect(capture.distinct_id).toBe('user-1');
    expect(capture.properties).toMatchObject({ plan: 'pro', $lib: 'posthog-node' });
    const identify = events.find((e) => e.event === '$identify')!;
    expect(identify.properties.$set ?? identify.$set).toMatchObject({ email: 'u1@example.com' });
    const alias = events.find((e) => e.event === '$create_alias')!;
    expect(alias.properties).toMatchObject({ alias: 'anon-1' });
    const group = events.find((e) => e.event === '$groupidentify')!;
    expect(group.properties).toMatchObject({ $group_type: 'company', $group_key: 'acme', $group_set: { seats: 10 } });
  });

  it('sdk - feature flag calls succeed with no flags, and capture with sendFeatureFlags still lands', async () => {
    const client = new PostHog('phc_sdk_test', { host: h.url, flushAt: 1, flushInterval: 0, fetchRetryCount: 0, featureFlagsRequestMaxRetries: 0 });
    const errors: unknown[] = [];
    client.on('error', (err) => errors.push(err));
    const flagCalls = () => h.metric('spate_ingest_requests_total', { route: 'flags', status: '200' });
    const before = await flagCalls();
    // No flag of that name: undefined, as PostHog answers a project without it.
    expect(await client.getFeatureFlag('new-checkout', 'flag-user')).toBeUndefined();
    expect(await client.isFeatureEnabled('new-checkout', 'flag-user')).toBeUndefined();
    expect(await client.getAllFlags('flag-user')).toEqual({});
    expect(await client.getAllFlagsAndPayloads('flag-user')).toEqual({ featureFlags: {}, featureFlagPayloads: {} });
    expect(await client.getFeatureFlagPayload('new-checkout', 'flag-user')).toBeUndefined();
    client.capture({ distinctId: 'flag-user', event: 'checkout viewed', sendFeatureFlags: true });
    await client.shutdown();
    expect(errors).toEqual([]);
    expect(await flagCalls()).toBeGreaterThanOrEqual(before + 4);
    const landed = (await h.events('events')).filter((e) => e.distinct_id === 'flag-user');
    expect(landed.map((e) => e.event).sort()).toEqual(['$feature_flag_called', 'checkout viewed']);
    // The SDK's own record of the call: the server answered (a request id), the flag is just not
    // there ("flag_missing", where a failed call says "unknown_error").
    const called = landed.find((e) => e.event === '$feature_flag_called')!;
    expect(called.properties).toMatchObject({ $feature_flag: 'new-checkout', $feature_flag_error: 'flag_missing', $feature_flag_request_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
  });

  it('sdk - historicalMigration sends to HISTORICAL', async () => {
    const client = new PostHog('phc_sdk_test', { host: h.url, flushAt: 2, flushInterval: 0, historicalMigration: true });
    client.capture({ distinctId: 'old-user', event: 'old event', timestamp: new Date('2021-03-04T05:06:07Z') });
    client.capture({ distinctId: 'old-user', event: 'older event', timestamp: new Date('2021-03-04T05:06:08Z') });
    await client.shutdown();
    const events = await h.events('historical');
    expect(events.map((e) => e.event)).toEqual(['old event', 'older event']);
    // The SDK sends sent_at, so timestamps are corrected by the (tiny) clock skew: now − sent_at.
    const sent = ['2021-03-04T05:06:07.000Z', '2021-03-04T05:06:08.000Z'];
    events.forEach((e, i) => {
      expect(e.sent_at).toBeDefined();
      expect(Date.parse(e.timestamp)).toBe(Date.parse(sent[i]!) + Date.parse(e.now) - Date.parse(e.sent_at!));
      expect(Math.abs(Date.parse(e.timestamp) - Date.parse(sent[i]!))).toBeLessThan(5_000);
    });
  });
});
