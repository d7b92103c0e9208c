import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';
import {
  allStreamNames,
  configuredStreamLayout,
  DEFAULT_STREAM_LAYOUT,
  MAX_STREAM_PARTITIONS,
  partitionOfShard,
  shardsOfPartition,
  STREAMS,
  streamConfig,
  streamConfigs,
  streamLayout,
  streamNamesOf,
  streamOfShard,
  streamPartitionsSettings,
  subjectFor,
  type StreamKind,
} from './streams.js';

const limits = { replicas: 3, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 };
const KINDS = Object.keys(STREAMS) as StreamKind[];

/** Whether a stream subject (`*` a whole token, `>` the rest) matches a concrete subject. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

describe('stream layout', () => {
  it('streams - one partition keeps the single streams, their names and subjects exactly', () => {
    expect(allStreamNames(DEFAULT_STREAM_LAYOUT)).toEqual(['EVENTS', 'HISTORICAL', 'OVERFLOW', 'PROCESSED']);
    expect(allStreamNames(streamLayout(64, 1))).toEqual(['EVENTS', 'HISTORICAL', 'OVERFLOW', 'PROCESSED']);
    for (const kind of KINDS) {
      const config = streamConfig(kind, limits, streamLayout(16, 1));
      expect(config.name).toBe(STREAMS[kind]);
      expect(config.subjects).toEqual([`${kind}.>`]);
      expect(config).not.toHaveProperty('description');
      expect(streamOfShard(kind, 15, streamLayout(16, 1))).toBe(STREAMS[kind]);
    }
  });

  it('streams - K = 3 splits EVENTS, HISTORICAL and OVERFLOW by shard range and keeps one PROCESSED', () => {
    const layout = streamLayout(16, 3);
    expect(allStreamNames(layout)).toEqual(['EVENTS_0', 'EVENTS_1', 'EVENTS_2', 'HISTORICAL_0', 'HISTORICAL_1', 'HISTORICAL_2', 'OVERFLOW_0', 'OVERFLOW_1', 'OVERFLOW_2', 'PROCESSED']);
    expect([0, 1, 2].map((p) => shardsOfPartition('events', p, layout))).toEqual([
      { first: 0, last: 5 },
      { first: 6, last: 10 },
      { first: 11, last: 15 },
    ]);
    expect(streamConfig('events', limits, layout, 1)).toMatchObject({
      name: 'EVENTS_1',
      subjects: ['events.*.6', 'events.*.7', 'events.*.8', 'events.*.9', 'events.*.10'],
      description: 'events of shards 6-10 (partition 1 of 3)',
      num_replicas: 3,
    });
    expect(streamOfShard('historical', 5, layout)).toBe('HISTORICAL_0');
    expect(streamOfShard('overflow', 6, layout)).toBe('OVERFLOW_1');
    expect(streamOfShard('processed', 15, layout)).toBe('PROCESSED');
    expect(streamNamesOf('processed', layout)).toEqual(['PROCESSED']);
  });

  it('streams - every subject of every shard is stored by exactly one stream, the one streamOfShard names', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }).chain((shards) => fc.tuple(fc.constant(shards), fc.integer({ min: 1, max: Math.min(shards, MAX_STREAM_PARTITIONS) }))),
        fc.integer({ min: 1, max: 1_000_000 }),
        ([shards, partitions], projectId) => {
          const layout = streamLayout(shards, partitions);
          const configs = streamConfigs(limits, layout);
          expect(new Set(configs.map((c) => c.name)).size).toBe(configs.length);
          for (const kind of KINDS) {
            let previous = 0;
            for (let shard = 0; shard < shards; shard++) {
              const subject = subjectFor(kind, projectId, shard);
              const storing = configs.filter((c) => c.subjects!.some((s) => matches(s, subject))).map((c) => c.name);
              expect(storing).toEqual([streamOfShard(kind, shard, layout)]);
              // Partitions hold contiguous ranges, in order.
              const p = partitionOfShard(kind, shard, layout);
              expect(p === previous || p === previous + 1).toBe(true);
              const range = shardsOfPartition(kind, p, layout);
              expect(shard >= range.first && shard <= range.last).toBe(true);
              previous = p;
            }
            expect(previous).toBe(streamNamesOf(kind, layout).length - 1);
          }
        },
      ),
    );
  });

  it('streams - STREAM_PARTITIONS is refused above SHARD_COUNT or the maximum, naming the setting', () => {
    expect(() => configuredStreamLayout({ shardCount: 2, streamPartitions: 3 })).toThrow(ConfigError);
    expect(() => configuredStreamLayout({ shardCount: 2, streamPartitions: 3 })).toThrow('STREAM_PARTITIONS (3) cannot exceed SHARD_COUNT (2)');
    expect(() => streamLayout(64, MAX_STREAM_PARTITIONS + 1)).toThrow(`STREAM_PARTITIONS must be an integer from 1 to ${MAX_STREAM_PARTITIONS}`);
    expect(configuredStreamLayout({ shardCount: 16, streamPartitions: 16 })).toEqual({ shardCount: 16, partitions: 16 });
    const definition = streamPartitionsSettings();
    expect(loadConfig(definition, {})).toEqual({ streamPartitions: 1 });
    expect(() => loadConfig(definition, { STREAM_PARTITIONS: '17' })).toThrow(/STREAM_PARTITIONS/);
    expect(() => loadConfig(definition, { STREAM_PARTITIONS: '0' })).toThrow(/STREAM_PARTITIONS/);
  });
});
