// The real posthog-js (the browser SDK, from node_modules) in headless Chromium, on a page of
// another origin than the capture URL, as a website would run it: every request it makes is
// answered (config, flags, events, the unload beacon), the console shows no error, and every
// event it sent is in EVENTS.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { startBrowser, waitFor, type BrowserHandle } from '../test/kit/index.js';

const KEY = 'phc_browser_test';
const sdk = readFileSync(createRequire(import.meta.url).resolve('posthog-js/dist/array.js'), 'utf8');

let h: IngestHarness;
let browser: BrowserHandle;
let site: Server;
let siteUrl: string;

function page(captureUrl: string): string {
  // debug: posthog-js then reports every failure it notices on the console.
  return `<!doctype html><html><head><title>shop</title><link rel="icon" href="data:,"><script src="/posthog.js"></script></head>
<body><button id="buy">Buy</button><script>
  window.sent = [];
  posthog.init(${JSON.stringify(KEY)}, {
    api_host: ${JSON.stringify(captureUrl)},
    opt_out_useragent_filter: true,
    debug: true,
    before_send: (event) => { window.sent.push({ uuid: event.uuid, event: event.event }); return event; },
  });
</script></body></html>`;
}

beforeAll(async () => {
  h = await startIngestHarness({ SPIKE_EVENTS_PER_SECOND: '0' }, { [KEY]: 11 });
  browser = await startBrowser();
  site = createServer((req, res) => {
    if (req.url === '/posthog.js') res.writeHead(200, { 'content-type': 'application/javascript' }).end(sdk);
    else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html' }).end(page(h.url));
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  const address = site.address();
  siteUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  site?.close();
  await browser?.close();
  await h?.stop();
});

type Sent = { uuid: string; event: string };
type Landed = { uuid: string; event: string; token: string; distinct_id: string; properties: Record<string, unknown> };

describe('posthog-js in Chromium', () => {
  it('sdk browser - config, flags, events and the unload beacon all answer, and every event lands', async () => {
    const { page: tab, errors, failedRequests, close } = await browser.newPage();
    const toCapture: string[] = [];
    let inFlight = 0;
    tab.on('request', (r) => {
      if (!r.url().startsWith(h.url)) return;
      toCapture.push(`${r.method()} ${r.url().slice(h.url.length)}`);
      inFlight++;
    });
    const finished = (r: { url(): string }) => {
      if (r.url().startsWith(h.url)) inFlight--;
    };
    tab.on('requestfinished', finished);
    tab.on('requestfailed', finished);
    const landed = async () => (await h.events('events')).filter((e) => e.token === KEY) as unknown as Landed[];
    const sent = () => tab.evaluate(() => (globalThis as unknown as { sent: Sent[] }).sent);
    /** Every event the page sent is in EVENTS and nothing is on its way to the capture URL. */
    const settled = async () => {
      const uuids = new Set((await landed()).map((e) => e.uuid));
      return inFlight === 0 && (await sent()).every((e) => uuids.has(e.uuid));
    };

    await tab.goto(siteUrl);
    await tab.waitForFunction(() => (globalThis as unknown as { posthog?: { __loaded?: boolean } }).posthog?.__loaded === true);

    // Flags: the remote config says there are none, so posthog-js asks only when told to.
    const flags = await tab.evaluate(
      () =>
        new Promise<{ flags: string[]; missing: unknown }>((resolve) => {
          const ph = (globalThis as unknown as { posthog: { reloadFeatureFlags(): void; onFeatureFlags(cb: (flags: string[]) => void): void; getFeatureFlag(k: string): unknown } }).posthog;
          ph.onFeatureFlags((flags) => resolve({ flags, missing: ph.getFeatureFlag('new-checkout') }));
          ph.reloadFeatureFlags();
        }),
    );
    expect(flags).toEqual({ flags: [], missing: undefined });

    await tab.click('#buy'); // autocapture
    await tab.evaluate(() => {
      const ph = (globalThis as unknown as { posthog: { capture(e: string, p: object): void; identify(id: string, p: object): void } }).posthog;
      ph.capture('checkout started', { cart: 3 });
      ph.identify('browser-user', { plan: 'pro' });
    });
    // posthog-js sends its queue every few seconds.
    await waitFor('the events sent so far in EVENTS', settled, 30_000);
    expect((await sent()).map((e) => e.event)).toEqual(expect.arrayContaining(['$pageview', '$autocapture', 'checkout started', '$identify']));

    // Leaving the page: what is still queued, and $pageleave, go out by sendBeacon.
    await tab.evaluate(() => (globalThis as unknown as { posthog: { capture(e: string): void } }).posthog.capture('leaving'));
    const sentBeforeLeaving = await sent();
    await tab.goto('about:blank');
    await waitFor('the events sent at unload in EVENTS', async () => {
      const events = await landed();
      const uuids = new Set(events.map((e) => e.uuid));
      return sentBeforeLeaving.every((e) => uuids.has(e.uuid)) && events.some((e) => e.event === '$pageleave');
    });
    await close();

    expect(failedRequests).toEqual([]);
    expect(errors).toEqual([]);
    // What it asked the capture URL for: its config (the script form, or JSON when that fails),
    // the flags, and events.
    expect(toCapture).toEqual(
      expect.arrayContaining([expect.stringMatching(new RegExp(`^GET /array/${KEY}/config(\\.js)?$`)), expect.stringMatching(/^POST \/flags\/\?v=2/), expect.stringMatching(/^POST \/e\//)]),
    );
    const events = await landed();
    expect(new Set(events.map((e) => e.uuid)).size).toBe(events.length);
    const checkout = events.find((e) => e.event === 'checkout started')!;
    expect(checkout.properties).toMatchObject({ cart: 3, $lib: 'web' });
  });
});
