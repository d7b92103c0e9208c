// The admin server's live cluster page (docs/operations.md, "The live page"):
//   GET /                 the page (public)
//   GET /live/*.js|css    its script and style, and uPlot's, from node_modules (public)
//   GET /live/figures     numbers only: rates, lag, stream sizes, processes and their shards,
//                         counts of export runs and plugin errors (public)
//   GET /live/details     export runs and plugin errors of the projects a personal API key may
//                         see (batch_export:read, plugin:read), and the processes' addresses
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { hasScope } from '../auth/scopes.js';
import type { Pool } from '../db/pool.js';
import { authenticate } from '../http/authenticate.js';
import type { PageAnswer, PageRoute } from '../http/page-route.js';
import type { Logger } from '../../lib/index.js';
import { recentExportRuns, recentPluginErrors } from '../store/pipeline-activity.js';
import type { LiveFigures } from './live-figures.js';
import { LIVE_HTML, LIVE_SCRIPT, LIVE_STYLE } from './page-assets.js';

/** How many runs and errors the details show. */
const DETAIL_ROWS = 20;

// Only this page's own files: no inline script, no other origin.
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const asset = (contentType: string, body: string | Buffer): (() => Promise<PageAnswer>) => {
  const answer: PageAnswer = { status: 200, contentType, body, headers: { 'cache-control': 'public, max-age=300', 'x-content-type-options': 'nosniff' } };
  return () => Promise.resolve(answer);
};

export function liveRoutes(live: LiveFigures, pool: Pool, log: Logger): PageRoute[] {
  const require = createRequire(import.meta.url);
  const uplotScript = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'));
  const uplotStyle = readFileSync(require.resolve('uplot/dist/uPlot.min.css'));
  const noStore = { 'cache-control': 'no-store' };
  return [
    { path: '/', handler: () => Promise.resolve({ status: 200, contentType: 'text/html; charset=utf-8', body: LIVE_HTML, headers: { ...PAGE_HEADERS, ...noStore } }) },
    { path: '/live/live.js', handler: asset('application/javascript; charset=utf-8', LIVE_SCRIPT) },
    { path: '/live/live.css', handler: asset('text/css; charset=utf-8', LIVE_STYLE) },
    { path: '/live/uplot.js', handler: asset('application/javascript; charset=utf-8', uplotScript) },
    { path: '/live/uplot.css', handler: asset('text/css; charset=utf-8', uplotStyle) },
    { path: '/live/figures', handler: async () => ({ status: 200, contentType: 'application/json', body: JSON.stringify(await live.figures()), headers: noStore }) },
    {
      path: '/live/details',
      handler: async (request) => {
        const authorization = request.headers.authorization;
        const principal = await authenticate(pool, log, { authorization: typeof authorization === 'string' ? authorization : undefined, body: undefined, query: request.query });
        const notes: string[] = [];
        const exportRuns = hasScope(principal.scopes, 'batch_export:read') ? await recentExportRuns(pool, principal, DETAIL_ROWS) : undefined;
        if (!exportRuns) notes.push("The key has no 'batch_export:read' scope: export runs are not shown.");
        const pluginErrors = hasScope(principal.scopes, 'plugin:read') ? await recentPluginErrors(pool, principal, DETAIL_ROWS) : undefined;
        if (!pluginErrors) notes.push("The key has no 'plugin:read' scope: plugin errors are not shown.");
        const body = { exportRuns, pluginErrors, processUrls: live.processUrls(), notes };
        return { status: 200, contentType: 'application/json', body: JSON.stringify(body), headers: noStore };
      },
    },
  ];
}
