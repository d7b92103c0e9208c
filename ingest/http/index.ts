// The event loop: the HTTP server (node:net + llhttp), capture request handling, body reading
// and answers.
export { hotMetrics, type CaptureDeps } from './capture-route.js';
export { listenHttp, type HttpServer, type ServerDeps } from './server.js';
export type { SdkConfigDeps } from './sdk-config-route.js';
