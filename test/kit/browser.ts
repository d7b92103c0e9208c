// A real headless Chromium for tests: Debian's `chromium` (installed by `npm run setup`) driven by
// playwright-core. Never `npx playwright install`: the machines fetch nothing but npm and apt.
import { existsSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';

/** Where Debian's package puts it; CHROMIUM_BIN overrides. */
export const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

// No sandbox (tests run as root), no GPU, and none of the browser's own traffic (updates,
// sync, QUIC probes): a test sees only the requests its page makes.
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface BrowserPage {
  page: Page;
  /** console.error messages and uncaught page errors, in order. */
  errors: string[];
  /** Requests that failed on the network or were answered with a status of 400 or more. */
  failedRequests: string[];
  /** Closes the page and its context. */
  close: () => Promise<void>;
}

export interface BrowserHandle extends AsyncDisposable {
  browser: Browser;
  /** A page in a fresh context that records its console errors and failed requests. */
  newPage(options?: { width?: number; height?: number }): Promise<BrowserPage>;
  close(): Promise<void>;
}

export async function startBrowser(): Promise<BrowserHandle> {
  if (!existsSync(CHROMIUM_BIN)) throw new Error(`no Chromium at ${CHROMIUM_BIN}: run \`npm run setup\` (it installs Debian's chromium) or set CHROMIUM_BIN`);
  // Loaded here, not at the top: every test imports the kit, few start a browser.
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM_BIN, headless: true, args: FLAGS });
  const close = () => browser.close();
  return {
    browser,
    async newPage({ width = 1280, height = 800 } = {}) {
      const context = await browser.newContext({ viewport: { width, height } });
      const page = await context.newPage();
      const errors: string[] = [];
      const failedRequests: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (err) => errors.push(err.message));
      page.on('requestfailed', (r) => failedRequests.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText ?? 'failed'}`));
      page.on('response', (r) => {
        if (r.status() >= 400) failedRequests.push(`${r.request().method()} ${r.url()}: ${r.status()}`);
      });
      return { page, errors, failedRequests, close: () => context.close() };
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
