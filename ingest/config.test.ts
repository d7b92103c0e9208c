import { describe, expect, it } from 'vitest';
import { describeConfig } from '../lib/index.js';
import { ingestConfigDefinition, ingestHelp, loadIngestConfig } from './config.js';

const MiB = 1024 * 1024;

describe('ingest config', () => {
  it('ingest config - MAX_DECOMPRESSED_BYTES defaults to 5 × MAX_BODY_BYTES and follows it', () => {
    expect(loadIngestConfig({}).maxBodyBytes).toBe(20 * MiB);
    expect(loadIngestConfig({}).maxDecompressedBytes).toBe(100 * MiB);
    expect(loadIngestConfig({ MAX_BODY_BYTES: '2MiB' }).maxDecompressedBytes).toBe(10 * MiB);
    expect(loadIngestConfig({ MAX_BODY_BYTES: '2MiB', MAX_DECOMPRESSED_BYTES: '' }).maxDecompressedBytes).toBe(10 * MiB);
  });

  it('ingest config - an explicit MAX_DECOMPRESSED_BYTES wins, and a bad one is reported by name', () => {
    expect(loadIngestConfig({ MAX_BODY_BYTES: '2MiB', MAX_DECOMPRESSED_BYTES: '3MiB' }).maxDecompressedBytes).toBe(3 * MiB);
    expect(() => loadIngestConfig({ MAX_DECOMPRESSED_BYTES: 'lots' })).toThrow(/MAX_DECOMPRESSED_BYTES: expected a size/);
  });

  it('ingest config - PUBLISH_MAX_MESSAGE_BYTES under 1 KiB is refused at start: a node would answer 413 to every event', () => {
    expect(() => loadIngestConfig({ PUBLISH_MAX_MESSAGE_BYTES: '512' })).toThrow(/PUBLISH_MAX_MESSAGE_BYTES: at least 1024 bytes/);
    expect(() => loadIngestConfig({ PUBLISH_MAX_MESSAGE_BYTES: '-1' })).toThrow(/PUBLISH_MAX_MESSAGE_BYTES: at least 1024 bytes/);
    expect(loadIngestConfig({ PUBLISH_MAX_MESSAGE_BYTES: '1KiB' }).maxMessageBytes).toBe(1024);
  });

  it('ingest config - the derived default is shown in words, and the config stays frozen', () => {
    const row = describeConfig(ingestConfigDefinition).find((s) => s.env === 'MAX_DECOMPRESSED_BYTES');
    expect(row?.default).toBe('5 × MAX_BODY_BYTES');
    expect(ingestHelp()).toContain('[default: 5 × MAX_BODY_BYTES]');
    expect(Object.isFrozen(loadIngestConfig({}))).toBe(true);
  });
});
