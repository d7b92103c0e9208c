export { registerNatsAlias, startNats, startNatsCluster, testNats, type NatsHandle, type NatsClusterHandle, type NatsCredentials, type NatsUserRole } from './nats.js';
export { startPostgres, freshDatabase, type PostgresHandle } from './postgres.js';
export { freePort } from '../../deploy/local/ports.js';
export { waitFor } from '../../deploy/local/wait.js';
export { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
export { interceptKvCalls, type KvCallHook } from './kv-calls.js';
export { startBrowser, CHROMIUM_BIN, type BrowserHandle, type BrowserPage } from './browser.js';
export { TEST_SECRET_KEY, testSecretKeyring } from './secrets.js';
export { startS3, type S3Handle } from './s3.js';
