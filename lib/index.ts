// Shared, pure code for every deployable. Imports nothing of ours, and none of uWS, pg or piscina.
export * from './config.js';
export * from './errors.js';
export * from './shard.js';
export * from './streams.js';
export * from './wire.js';
export * from './logger.js';
export * from './metrics.js';
export * from './uuid.js';
export * from './nats.js';
export * from './runtime-module.js';
export * from './cluster-file.js';
export * from './pipeline.js';
export * from './sanitize.js';
export * from './process-shell.js';
export * from './nats-settings.js';
export * from './secrets.js';
